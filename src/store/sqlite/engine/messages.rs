//! A post on SQLite: rendered on the caller's thread and staged; the batch writes every
//! staged post at once (`message_staging`). The rest of the `Messages` storage:
//! `store/sql/messages.rs`.

use switchboard_types::time::Timestamp;

use super::super::message_row::RenderedMessage;
use super::super::message_staging::{IdempotencyRow, PostSlot, StagedPost};
use super::super::{SqliteStore, budgets, idempotency, messages};
use crate::model::{
    Decided, IdempotencyClaim, NewMessage, NewPost, PostContext, PostOutcome, PostResult,
};
use crate::store::StoreError;
use crate::store::writer::{Isolation, Writes};

impl SqliteStore {
    /// SQLite's batch insert path for a post: rendered here, on the caller's thread (see
    /// `RenderedMessage`), staged, and written with the batch's other posts at once.
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
        // Rendered here, on the caller's thread (see `RenderedMessage`).
        let rendered = RenderedMessage::new(post.message, post.recipient_ids)?;
        let (deliver_to, response, charges) = (post.deliver_to, post.response, post.charges);
        let isolation = Isolation::for_charges(&charges);
        self.writer()
            .write_then(
                isolation,
                move |tx| {
                    Box::pin(async move {
                        if let Some(claim) = &claim
                            && let Some(stored) =
                                idempotency::find(tx.conn().await?, claim.agent, &claim.key).await?
                        {
                            return Ok(PostOutcome::Replayed(stored));
                        }
                        if !charges.is_empty() {
                            budgets::spend(tx.conn_beside_posts().await?, &charges).await?;
                        }
                        let now = Timestamp::now();
                        let final_response_given = match response {
                            Some(link) => {
                                let conn = tx.conn().await?;
                                messages::final_response_given(conn, link.original, link.responder)
                                    .await?
                            }
                            None => false,
                        };
                        let context = PostContext {
                            now,
                            final_response_given,
                        };
                        let decided = decide(&rendered.message, context)?;
                        let key = claim
                            .zip(decided.answer)
                            .map(|(claim, answer)| IdempotencyRow { claim, answer });
                        let post = StagedPost::new(rendered, deliver_to, now, response, key);
                        let slot = tx.staging().stage(post);
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
