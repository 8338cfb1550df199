//! [`SurfaceState`]: what a client surface keeps of a request for its own
//! answers (the request members its API repeats, how its stream is
//! framed), as a type of that surface's own. The model, the sessions, the
//! cache and the dialects carry it without reading it: they ask it only
//! the neutral questions of [`OwnState`], and only its surface reads it
//! ([`SurfaceState::get`]).

use std::any::Any;
use std::fmt;

/// A surface's own state type (`Clone` and `PartialEq` give it
/// [`CopyState`]). The defaults are a surface's that keeps no answer for
/// later requests.
pub trait OwnState: Any + fmt::Debug + Send + Sync + CopyState {
    /// The client's API keeps answers for later requests to continue (the
    /// gateway stores them), and this request did not opt out.
    fn stores_answer(&self) -> bool {
        false
    }
    /// The request continues the stored answer `previous_id`: its answer
    /// says so.
    fn continues(&mut self, _previous_id: &str) {}
    /// The id the answer goes under: the gateway's, for an answer it stores.
    fn set_answer_id(&mut self, _id: &str) {}
}

/// What makes [`SurfaceState`] `Clone` and `PartialEq` through the box,
/// for every state type that is both.
pub trait CopyState {
    /// A boxed copy.
    fn boxed_clone(&self) -> Box<dyn OwnState>;
    /// `other` is a state of the same type, and equal.
    fn same(&self, other: &dyn Any) -> bool;
}

impl<T: OwnState + Clone + PartialEq> CopyState for T {
    fn boxed_clone(&self) -> Box<dyn OwnState> {
        Box::new(self.clone())
    }
    fn same(&self, other: &dyn Any) -> bool {
        other.downcast_ref() == Some(self)
    }
}

/// One surface's state, or none (a surface that keeps nothing).
#[derive(Default)]
pub struct SurfaceState(Option<Box<dyn OwnState>>);

impl SurfaceState {
    pub fn of(state: impl OwnState) -> Self {
        Self(Some(Box::new(state)))
    }

    /// The state, if it is of type `T` (its surface's).
    pub fn get<T: OwnState>(&self) -> Option<&T> {
        let state: &dyn Any = self.0.as_deref()?;
        state.downcast_ref()
    }

    /// See [`OwnState::stores_answer`].
    pub fn stores_answer(&self) -> bool {
        self.0.as_ref().is_some_and(|s| s.stores_answer())
    }

    /// See [`OwnState::continues`].
    pub fn continues(&mut self, previous_id: &str) {
        if let Some(state) = &mut self.0 {
            state.continues(previous_id);
        }
    }

    /// See [`OwnState::set_answer_id`].
    pub fn set_answer_id(&mut self, id: &str) {
        if let Some(state) = &mut self.0 {
            state.set_answer_id(id);
        }
    }
}

impl Clone for SurfaceState {
    fn clone(&self) -> Self {
        Self(self.0.as_ref().map(|s| s.boxed_clone()))
    }
}

impl PartialEq for SurfaceState {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                let b: &dyn Any = &**b;
                a.same(b)
            }
            _ => false,
        }
    }
}

impl fmt::Debug for SurfaceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(state) => state.fmt(f),
            None => f.write_str("SurfaceState(none)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Kept {
        id: Option<String>,
    }

    impl OwnState for Kept {
        fn stores_answer(&self) -> bool {
            true
        }
        fn set_answer_id(&mut self, id: &str) {
            self.id = Some(id.to_owned());
        }
    }

    #[derive(Debug, Clone, PartialEq)]
    struct Other;

    impl OwnState for Other {}

    #[test]
    fn only_its_surface_reads_it_and_the_rest_ask_it() {
        let mut state = SurfaceState::of(Kept { id: None });
        assert!(state.get::<Other>().is_none());
        assert!(state.stores_answer());
        state.set_answer_id("resp_1");
        assert_eq!(state.get::<Kept>().unwrap().id.as_deref(), Some("resp_1"));
        // None: keeps nothing, and takes an id without a fault.
        let mut none = SurfaceState::default();
        none.set_answer_id("resp_1");
        none.continues("resp_0");
        assert!(!none.stores_answer() && none.get::<Kept>().is_none());
    }

    #[test]
    fn copies_and_comparisons_see_the_state() {
        let a = SurfaceState::of(Kept { id: None });
        let mut b = a.clone();
        assert_eq!(a, b);
        b.set_answer_id("resp_1");
        assert_ne!(a, b);
        assert_ne!(a, SurfaceState::of(Other));
        assert_ne!(a, SurfaceState::default());
        assert_eq!(SurfaceState::default(), SurfaceState::default());
    }
}
