//! `BEGIN`, `COMMIT` and `ABORT`: a transaction's `SEND`s and acks are held in memory
//! until its `COMMIT`, bounded per connection and, in bytes, per credential.

use super::{End, MAX_TRANSACTION_FRAMES, MAX_TRANSACTIONS, Session, Wire, required};
use crate::core::sessions::MAX_BUFFERED_BYTES;
use crate::transport::stomp::frame::{Command, Frame};

impl<W: Wire> Session<'_, W> {
    pub(super) fn begin(&mut self, frame: &Frame) -> Result<(), End> {
        let name = required(frame, "transaction")?;
        if self.transactions.contains_key(name) {
            return Err(End::error(format!("transaction '{name}' is already open")));
        }
        if self.transactions.len() >= MAX_TRANSACTIONS {
            return Err(End::error(format!(
                "too many open transactions: at most {MAX_TRANSACTIONS} per connection"
            )));
        }
        self.transactions.insert(name.to_owned(), Vec::new());
        Ok(())
    }

    pub(super) fn buffer(&mut self, frame: &Frame) -> Result<(), End> {
        let name = required(frame, "transaction")?;
        match self.transactions.get_mut(name) {
            Some(frames) if frames.len() >= MAX_TRANSACTION_FRAMES => Err(End::error(format!(
                "transaction too large: at most {MAX_TRANSACTION_FRAMES} frames"
            ))),
            // Held against the credential: more connections do not buy more memory.
            Some(_) if !self.hold.buffer(frame.body.len()) => Err(End::error(format!(
                "transactions too large: at most {MAX_BUFFERED_BYTES} bytes of bodies held \
                 by one credential's connections"
            ))),
            Some(frames) => {
                frames.push(frame.clone());
                Ok(())
            }
            None => Err(End::error(format!("no transaction '{name}'"))),
        }
    }

    /// Gives a finished transaction's bytes back to the credential's buffer.
    fn ended(&mut self, frames: &[Frame]) {
        let bytes = frames.iter().map(|f| f.body.len()).sum();
        self.hold.release(bytes);
    }

    /// `COMMIT`: the transaction's frames, in order. Each `SEND` commits on its own: a
    /// refused one gets its `ERROR` and the others still go out.
    pub(super) async fn commit(&mut self, frame: &Frame) -> Result<(), End> {
        let name = required(frame, "transaction")?;
        let Some(frames) = self.transactions.remove(name) else {
            return Err(End::error(format!("no transaction '{name}'")));
        };
        self.ended(&frames);
        for frame in frames {
            match frame.command {
                Command::Send => {
                    self.send_or_refuse(&frame).await?;
                }
                Command::Ack => self.ack(&frame, true)?,
                Command::Nack => self.ack(&frame, false)?,
                _ => {}
            }
        }
        Ok(())
    }

    pub(super) fn abort(&mut self, frame: &Frame) -> Result<(), End> {
        let name = required(frame, "transaction")?;
        match self.transactions.remove(name) {
            Some(frames) => {
                self.ended(&frames);
                Ok(())
            }
            None => Err(End::error(format!("no transaction '{name}'"))),
        }
    }
}
