//! What the two sides (`hard`, `soft`) share: a timer as the user armed it,
//! its callback, and what an expiry round did.

use crate::service::Expiry;

/// A timer's callback, run on its side's expiry thread.
pub(crate) type Callback = Box<dyn FnMut(Expiry) + Send>;

/// A timer as the user armed it.
pub(crate) struct Armed {
    pub(crate) deadline: u64,
    pub(crate) slack: u64,
    /// At least 1 ns: a period of zero is refused before it gets here.
    pub(crate) period: Option<u64>,
    pub(crate) callback: Callback,
}

/// What an expiry round did.
pub(crate) enum Round {
    /// The service is stopping: nothing was taken.
    Stopped,
    /// Nothing was due (or the round's steps all went to moving soft
    /// timers down the wheel); the alarm is set for the next deadline.
    Idle,
    /// Timers fired.
    Fired,
}
