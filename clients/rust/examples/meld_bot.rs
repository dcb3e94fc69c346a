//! A slightly smarter bot that reads the observation: melds when it can, else keeps its
//! trumps by playing a non-trump card, else takes the first legal action.
//!
//!     cargo run --release --example meld_bot

use gaigel_bot::pb::{ActionKind, DecisionRequest};
use gaigel_bot::{Bot, Config};

struct MeldBot;

impl Bot for MeldBot {
    fn decide(&mut self, request: &DecisionRequest) -> i32 {
        let obs = request
            .observation
            .as_ref()
            .expect("the server always sends the observation");
        let hand: Vec<&str> = obs.hand.iter().map(|c| c.code.as_str()).collect(); // e.g. ["HKa", "EAb"]
        eprintln!(
            "seat {} phase {:?} hand {hand:?} trump {:?}",
            obs.seat,
            obs.phase(),
            obs.trump_suit()
        );
        let actions = &request.legal_actions; // in ascending id order, never empty
        if let Some(meld) = actions
            .iter()
            .find(|a| a.kind() == ActionKind::PlayWithMeld)
        {
            return meld.id; // always meld when we can
        }
        let non_trump = actions
            .iter()
            .find(|a| a.card.as_ref().is_some_and(|c| c.suit != obs.trump_suit));
        non_trump.unwrap_or(&actions[0]).id
    }
}

fn main() -> Result<(), gaigel_bot::Error> {
    gaigel_bot::run(&mut MeldBot, Config::from_env("meld-rs")?)?;
    Ok(())
}
