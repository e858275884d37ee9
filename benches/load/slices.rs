//! Comparisons measured in alternating slices: every side gets the same moments of a
//! machine whose speed drifts.

use std::net::SocketAddr;
use std::time::Duration;

use hyper::StatusCode;

use crate::harness::{LoadResult, MakeRequest, http_load};

/// One side of an interleaved comparison: a server, the answer that counts as success,
/// and the requests.
pub struct Side {
    pub addr: SocketAddr,
    pub expect: StatusCode,
    pub make: MakeRequest,
}

/// Measures the sides in `slices` alternating slices (a, b, a, b, …) sharing
/// `opts.duration()`, and returns each side's total over its slices. This machine's
/// speed drifts by ±20 % within a minute (shared cores): back-to-back runs compared a
/// fast moment with a slow one, and a ratio swung between 33 % and 50 % for the same
/// binary. Interleaving gives every side the same moments. The full warm-up comes before
/// the first slice; after that a short one lets the new connections settle.
pub async fn interleaved<const N: usize>(
    opts: &crate::Opts,
    slices: u32,
    sides: &[Side; N],
) -> [LoadResult; N] {
    let totals = interleaved_all(opts, slices, sides).await;
    match totals.try_into() {
        Ok(totals) => totals,
        Err(_) => unreachable!("one total per side"),
    }
}

/// [`interleaved`] for as many sides as there are.
pub async fn interleaved_all(opts: &crate::Opts, slices: u32, sides: &[Side]) -> Vec<LoadResult> {
    let slice = opts.duration() / slices;
    let mut totals: Vec<LoadResult> = sides.iter().map(|_| LoadResult::default()).collect();
    for n in 0..slices {
        let warmup = if n == 0 {
            opts.warmup()
        } else {
            Duration::from_millis(300)
        };
        for (side, total) in sides.iter().zip(totals.iter_mut()) {
            let part = http_load(
                side.addr,
                opts.connections,
                warmup,
                slice,
                side.expect,
                side.make.clone(),
            )
            .await;
            total.merge(part);
        }
    }
    totals
}
