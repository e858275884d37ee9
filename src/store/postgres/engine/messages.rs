//! A post on PostgreSQL: staged; the batch writes every staged post at once
//! (`message_staging`). The rest of the `Messages` storage: `store/sql/messages.rs`.

use switchboard_types::time::Timestamp;

use super::super::message_staging::{PostSlot, StagedPost};
use super::super::{PgStore, budgets, idempotency, messages};
use crate::model::{
    Decided, IdempotencyClaim, NewMessage, NewPost, PostContext, PostOutcome, PostResult,
};
use crate::store::StoreError;
use crate::store::writer::Writes;

impl PgStore {
    /// PostgreSQL's batch insert path for a post: staged, and written with the batch's
    /// other posts in one statement over arrays.
    pub(crate) async fn stage_post<T, R, E, D, A>(
        &self,
        post: NewPost,
        claim: Option<IdempotencyClaim>,
        decide: D,
        after: A,
    ) -> Result<PostOutcome<R>, E>
    where
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        D: FnOnce(&NewMessage, PostContext) -> Result<Decided<T>, E> + Send + 'static,
        A: FnOnce(T, Result<PostResult, StoreError>) -> Result<R, E> + Send + 'static,
    {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    // Only what must be read inside the transaction touches the
                    // connection; a plain post just stages.
                    if let Some(claim) = &claim
                        && let Some(stored) =
                            idempotency::find(tx.conn().await?, claim.agent, &claim.key).await?
                    {
                        return Ok(PostOutcome::Replayed(stored));
                    }
                    if !post.charges.is_empty() {
                        budgets::spend(tx.conn().await?, &post.charges).await?;
                    }
                    let now = Timestamp::now();
                    let final_response_given = match post.response {
                        Some(link) => {
                            messages::final_response_given(
                                tx.conn().await?,
                                link.original,
                                link.responder,
                            )
                            .await?
                        }
                        None => false,
                    };
                    let context = PostContext {
                        now,
                        final_response_given,
                    };
                    let decided = decide(&post.message, context)?;
                    let slot = PostSlot::default();
                    tx.stage(StagedPost {
                        key: claim.zip(decided.answer),
                        message: post.message,
                        recipient_ids: post.recipient_ids,
                        deliver_to: post.deliver_to,
                        created_at: now,
                        response: post.response,
                        slot: slot.clone(),
                    });
                    Ok(PostOutcome::Written((slot, decided.value)))
                })
            },
            move |staged: PostOutcome<(PostSlot, T)>| {
                staged.and_then_written(|(slot, value)| after(value, slot.outcome()))
            },
        )
        .await
    }
}
