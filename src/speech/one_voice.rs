//! One voice through a conversation (a WebSocket stream's sentences, a script speaker's
//! lines) where the engine would give each utterance a voice of its own (OmniVoice without a
//! clone): the first utterance leads, and every later one continues from what it leaves,
//! waiting for it on its own task, not on a worker.

use tokio::sync::watch;

use crate::engine::{Continuation, Continuity};

/// A conversation's voice, which hands each utterance its [`Turn`] in order.
pub(super) enum OneVoice {
    /// The voice does not drift.
    Unneeded,
    /// The first utterance is still to come.
    FirstToCome,
    /// What the first utterance leaves, once it has; closed without it, it left nothing (it
    /// failed, or its engine had nothing to leave), and the rest speak on their own.
    LeftBy(watch::Receiver<Option<Continuity>>),
}

impl OneVoice {
    /// For a voice that `drifts` from one utterance to the next, or does not.
    pub fn new(drifts: bool) -> Self {
        match drifts {
            true => Self::FirstToCome,
            false => Self::Unneeded,
        }
    }

    /// The next utterance's turn.
    pub fn next(&mut self) -> Turn {
        match self {
            Self::Unneeded => Turn::Apart,
            Self::FirstToCome => {
                let (leaves, left) = watch::channel(None);
                *self = Self::LeftBy(left);
                Turn::Leads(leaves)
            }
            Self::LeftBy(left) => Turn::Follows(left.clone()),
        }
    }
}

/// One utterance's place in its conversation's voice.
pub(super) enum Turn {
    /// The voice does not drift: nothing to lead or follow.
    Apart,
    Leads(watch::Sender<Option<Continuity>>),
    Follows(watch::Receiver<Option<Continuity>>),
}

impl Turn {
    /// How the utterance is spoken: `None` apart; a later one first waits for what the first
    /// left (and speaks alone when the first left nothing).
    pub async fn continuation(&self) -> Option<Continuation> {
        Some(match self {
            Self::Apart => return None,
            Self::Leads(_) => Continuation::Leads,
            Self::Follows(left) => match left.clone().wait_for(Option::is_some).await {
                Ok(first) => first
                    .clone()
                    .map_or(Continuation::Alone, Continuation::Follows),
                Err(_) => Continuation::Alone,
            },
        })
    }

    /// Hands on what the leading utterance left, when its audio brought it.
    pub fn leave(&self, left: Option<&Continuity>) {
        if let (Self::Leads(leaves), Some(left)) = (self, left) {
            leaves.send_replace(Some(left.clone()));
        }
    }
}
