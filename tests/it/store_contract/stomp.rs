//! The STOMP state a store keeps for the next start, on both engines.

use switchboard::model::{AgentRecord, QueueCursorRow};
use switchboard::store::StoreError;
use switchboard_types::time::Timestamp;

use super::{engines, members};

/// What a STOMP queue keeps across a restart: its cursor (never moved back) and whether
/// its agent went deaf on it, listed for current members only.
#[tokio::test]
async fn a_deaf_queue_is_kept_for_the_next_start() {
    for engine in engines("contract_stomp_state").await {
        let store = &engine.store;
        let name = engine.name;
        let (_, agents) = members(store, "wise", 2).await;
        let row = |agent: &AgentRecord, queue: &str, seq: i64, deaf: bool| QueueCursorRow {
            agent: agent.pk,
            queue: queue.to_owned(),
            acked_seq: seq,
            deaf,
        };
        store
            .save_queue_cursors(vec![
                row(&agents[0], "request", 7, true),
                row(&agents[0], "response", 3, false),
                row(&agents[1], "request", 2, true),
            ])
            .await
            .expect("saved");
        // Heard again (deaf: false) with an older cursor: the cursor stays at 7.
        store
            .save_queue_cursors(vec![row(&agents[1], "request", 1, false)])
            .await
            .expect("saved");
        let deaf = store.deaf_queues().await.expect("deaf queues");
        assert_eq!(deaf, vec![row(&agents[0], "request", 7, true)], "{name}");
        assert_eq!(
            store
                .queue_cursor(agents[1].pk, "request".into())
                .await
                .expect("cursor"),
            2,
            "{name}: never back"
        );
        store
            .update_agent(
                agents[0].pk,
                |a| {
                    a.removed_at = Some(Timestamp::now());
                    Ok::<_, StoreError>(())
                },
                |a| a,
            )
            .await
            .expect("removed");
        assert!(
            store.deaf_queues().await.expect("deaf queues").is_empty(),
            "{name}: a removed agent is no one's deaf process"
        );

        engine.close().await;
    }
}

/// The team's default Wise Agents context, and which agents the team's bridge serves.
#[tokio::test]
async fn the_default_context_and_the_bridged_agents_are_kept() {
    for engine in engines("contract_stomp_team").await {
        let store = &engine.store;
        let name = engine.name;
        let (team_pk, agents) = members(store, "wise", 1).await;
        let bridged = store
            .insert_agent(
                AgentRecord {
                    stomp_bridge: true,
                    ..super::agent(team_pk, "bridged")
                },
                |a| a,
            )
            .await
            .expect("inserted");
        let loaded = store.load_agents().await.expect("agents");
        let flag = |pk| loaded.iter().find(|a| a.pk == pk).map(|a| a.stomp_bridge);
        assert_eq!(flag(bridged.pk), Some(true), "{name}");
        assert_eq!(flag(agents[0].pk), Some(false), "{name}");
        store
            .update_team(
                team_pk,
                |t| {
                    t.stomp_default_context = Some("CLI.default".into());
                    Ok::<_, StoreError>(())
                },
                |t| t,
            )
            .await
            .expect("updated");
        let teams = store.load_teams().await.expect("teams");
        let team = teams.iter().find(|t| t.pk == team_pk).expect("the team");
        assert_eq!(
            team.stomp_default_context.as_deref(),
            Some("CLI.default"),
            "{name}"
        );
        engine.close().await;
    }
}
