//! Writes whose callers go away: a client gone mid-request drops the request's future,
//! and with it the store call it was waiting on.

use std::task::Poll;

use switchboard::model::InboxFilter;
use switchboard_types::ids::MessageId;
use switchboard_types::messages::MessageKind;

use super::{engines, members, message, oldest_first, post_to, write};

/// A write dropped after it was handed to the store (polled twice: past the yield a lone
/// write takes before committing on its caller's thread, decision 026) still commits,
/// whole, and a later write is numbered after it with no gap. A lone write commits in a
/// task of its own: were it committed inside the caller's future, dropping the future
/// would stop the batch half-way and the message would be missing (or the transaction
/// left open under the next write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_caller_goes_away_commits_whole_and_the_next_follows_it() {
    for engine in engines("contract_abandoned").await {
        let (name, store) = (engine.name, engine.store.clone());
        let (_, agents) = members(&store, "gone", 2).await;
        let (a, b) = (&agents[0], &agents[1]);
        for polls in 1..=4 {
            let post = post_to(
                message(a, &format!("gone{polls}"), MessageKind::Message),
                &[b],
            );
            let mut pending = std::pin::pin!(write(&store, post));
            for _ in 0..polls {
                if let Poll::Ready(done) = futures_util::poll!(&mut pending) {
                    done.expect("written");
                    break;
                }
            }
        }
        let after = post_to(message(a, "after", MessageKind::Message), &[b]);
        write(&store, after).await.expect("written");
        let page = store
            .list_inbox(b.pk, &InboxFilter::default(), oldest_first(100))
            .await
            .expect("inbox");
        let read: Vec<(i64, MessageId, String)> = page
            .items
            .iter()
            .map(|i| {
                let text = i.message.content.text.clone();
                (i.entry.seq, i.message.message_id.clone(), text)
            })
            .collect();
        let seqs: Vec<i64> = read.iter().map(|r| r.0).collect();
        assert_eq!(
            seqs,
            (1..=read.len() as i64).collect::<Vec<_>>(),
            "{name}: {read:?}"
        );
        for (_, id, text) in &read {
            assert_eq!(id.as_str(), text, "{name}: a message comes back whole");
        }
        let ids: Vec<&str> = read.iter().map(|r| r.1.as_str()).collect();
        for handed in ["gone2", "gone3", "gone4"] {
            assert!(
                ids.contains(&handed),
                "{name}: {handed} was handed to the store: {ids:?}"
            );
        }
        assert_eq!(ids.last(), Some(&"after"), "{name}: {ids:?}");
        engine.close().await;
    }
}
