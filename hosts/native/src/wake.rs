//! Attempts paused for what the main thread brings (a Google access token:
//! `Session::waiting`), woken on their own worker. Each such filter gets a
//! filter scheduler when it starts waiting; the main thread commits every
//! waiting filter's scheduler on the token tick and when a token arrives,
//! and Envoy calls `on_http_filter_scheduled` on the filter's worker, where
//! the session is woken and, when it goes on, the request resumed (what
//! proxy-wasm's root context does with `set_effective_context`).

use super::*;

/// A filter scheduler: Envoy's, committed from any thread (it holds a weak
/// reference to its filter, so a commit after the filter ended is dropped).
struct Scheduler(*mut std::ffi::c_void);
// SAFETY: Envoy's filter scheduler may be committed from any thread.
unsafe impl Send for Scheduler {}

/// The waiting filters' schedulers, by filter pointer.
fn waiting() -> std::sync::MutexGuard<'static, HashMap<usize, Scheduler>> {
    static WAITING: OnceLock<Mutex<HashMap<usize, Scheduler>>> = OnceLock::new();
    WAITING
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// After a request hook: a session that now waits is listed (once), with a
/// scheduler of its own filter.
pub(crate) fn register_if_waiting(ptr: FilterModule, stream: &Stream, waits: bool) {
    if !waits {
        return;
    }
    let mut waiting = waiting();
    if waiting.contains_key(&(ptr as usize)) {
        return;
    }
    // SAFETY: the filter is live (its hook just ran).
    let scheduler =
        unsafe { abi::envoy_dynamic_module_callback_http_filter_scheduler_new(stream.envoy) };
    if !scheduler.is_null() {
        waiting.insert(ptr as usize, Scheduler(scheduler));
    }
}

/// The filter ended or no longer waits: its scheduler is deleted.
pub(crate) fn forget(ptr: FilterModule) {
    if let Some(scheduler) = waiting().remove(&(ptr as usize)) {
        // SAFETY: created by `scheduler_new`, deleted once (taken off the list).
        unsafe { abi::envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler.0) };
    }
}

/// Main thread: every waiting filter is woken on its worker.
pub(crate) fn wake_all() {
    for scheduler in waiting().values() {
        // SAFETY: live until `forget` takes it off the list, under this lock.
        unsafe { abi::envoy_dynamic_module_callback_http_filter_scheduler_commit(scheduler.0, 0) };
    }
}

/// # Safety
/// Envoy's contract: `filter` is the live filter the scheduler was made for.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    filter_envoy: FilterEnvoy,
    filter: FilterModule,
    _event_id: u64,
) {
    let mut goes_on = false;
    let mut still_waits = true;
    run(filter, None, |session| {
        let flow = session.on_wake();
        still_waits = session.waiting();
        goes_on = flow == Flow::Continue && !still_waits;
        flow
    });
    if !still_waits {
        forget(filter);
    }
    if goes_on {
        // SAFETY: the filter is live (Envoy called its hook).
        unsafe { abi::envoy_dynamic_module_callback_http_filter_continue_decoding(filter_envoy) };
    }
}
