//! A small client for Gaigel bots: connects to a Gaigel server over gRPC (protocol
//! `gaigel.v1`), sends `Join`, answers every `DecisionRequest` with [`Bot::decide`],
//! handles `ActionRejected`, resumes a dropped match with `Resume`, and returns at
//! `MatchEnd` once the configured number of matches is played.
//!
//! The protocol types are generated from `proto/gaigel/v1/*.proto` by `build.rs` and live
//! in [`pb`].

mod client;

pub use client::{run, run_async, Config, Error};

/// The generated `gaigel.v1` messages and the `BotService` client.
pub mod pb {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("gaigel.v1");
}

/// The protocol major version this kit speaks.
pub const PROTOCOL_VERSION: i32 = 1;

/// A bot: one required method, [`Bot::decide`], and optional hooks that see the server's
/// messages in order.
pub trait Bot {
    /// The bot's version string, recorded in match records.
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }
    /// Chooses an action: must return the `id` of one of `request.legal_actions`.
    fn decide(&mut self, request: &pb::DecisionRequest) -> i32;
    /// The session was accepted (also after a resume).
    fn on_welcome(&mut self, _msg: &pb::Welcome) {}
    /// A match begins: seat, sides, ruleset, clocks, and `msg.bot_seed`: seed all your
    /// randomness from it (e.g. `Rng::new(msg.bot_seed)`) and a rematch of the record
    /// plays the same (docs/bot-guide.md, Bot seeds).
    fn on_match_start(&mut self, _msg: &pb::MatchStart) {}
    /// A hand begins: dealer, forehand, own cards, trump card.
    fn on_hand_start(&mut self, _msg: &pb::HandStart) {}
    /// Something public happened.
    fn on_event(&mut self, _msg: &pb::Event) {}
    /// An answer was not accepted (the client retries for you).
    fn on_rejected(&mut self, _msg: &pb::ActionRejected) {}
    /// A hand ended.
    fn on_hand_end(&mut self, _msg: &pb::HandEnd) {}
    /// A match ended; the seed is revealed here.
    fn on_match_end(&mut self, _msg: &pb::MatchEnd) {}
}

/// A small seeded pseudo-random generator (SplitMix64): reproducible, no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "Rng::below(0)");
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// A random element of a non-empty slice.
    pub fn choose<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Card code of a card, for example `"HKa"`, or `"??"` for a missing (face-down) card.
pub fn card_code(card: Option<&pb::Card>) -> &str {
    card.map_or("??", |c| c.code.as_str())
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn rng_is_seeded_and_in_range() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        for _ in 0..100 {
            let x = a.below(7);
            assert_eq!(x, b.below(7));
            assert!(x < 7);
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
