//! Google access tokens (Vertex AI) and model lists (model discovery): an
//! upstream config's fetches on the main thread, woken by a ticker thread
//! through Envoy's config scheduler, their callouts answered to the core's
//! `TokenFetcher` and `discovery::Fetcher`.

use super::*;

/// An upstream config's token and model-list fetches (main thread).
pub(crate) struct Root {
    pub(crate) config: Rc<Config>,
    pub(crate) tokens: TokenFetcher,
    pub(crate) discovery: discovery::Fetcher,
    pub(crate) ticker: Option<Ticker>,
}

pub(crate) struct SchedulerPtr(abi::ConfigScheduler);
// SAFETY: Envoy's config scheduler may be committed from any thread.
unsafe impl Send for SchedulerPtr {}

/// A thread that asks for the config's `on_scheduled` every
/// [`host::TOKEN_TICK`] (the ABI has no timer; proxy-wasm's tick).
pub(crate) struct Ticker {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<SchedulerPtr>>,
}

impl Ticker {
    pub(crate) fn start(config_envoy: FilterConfigEnvoy) -> Option<Self> {
        // SAFETY: called from `config_new` on the main thread.
        let scheduler = unsafe {
            abi::envoy_dynamic_module_callback_http_filter_config_scheduler_new(config_envoy)
        };
        if scheduler.is_null() {
            return None;
        }
        let scheduler = SchedulerPtr(scheduler);
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("llm-gw-tick".into())
            .spawn(move || {
                let (lock, wake) = &*flag;
                let mut stopped = lock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                loop {
                    let (guard, _) = wake
                        .wait_timeout(stopped, host::TOKEN_TICK)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    stopped = guard;
                    if *stopped {
                        return scheduler;
                    }
                    // SAFETY: the scheduler lives until this thread returned it.
                    unsafe {
                        abi::envoy_dynamic_module_callback_http_filter_config_scheduler_commit(
                            scheduler.0,
                            0,
                        )
                    };
                }
            })
            .ok()?;
        Some(Self {
            stop,
            thread: Some(thread),
        })
    }

    pub(crate) fn stop(mut self) {
        let (lock, wake) = &*self.stop;
        *lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        wake.notify_all();
        if let Some(Ok(scheduler)) = self.thread.take().map(JoinHandle::join) {
            // SAFETY: no thread commits to it any more.
            unsafe {
                abi::envoy_dynamic_module_callback_http_filter_config_scheduler_delete(scheduler.0)
            };
        }
    }
}

/// # Safety
/// Envoy's contract: `config` is live.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(
    config_envoy: FilterConfigEnvoy,
    config: FilterConfigModule,
    _event_id: u64,
) {
    // SAFETY: as the function's contract says.
    let Some(config) = (unsafe { filter_config(config) }) else {
        return;
    };
    let id = config.id;
    let _ = catch_unwind(AssertUnwindSafe(|| {
        ROOTS.with(|roots| {
            if let Some(root) = roots.borrow_mut().get_mut(&id) {
                let config = root.config.clone();
                root.tokens.tick(&RootHost(config_envoy), &config);
                root.discovery.tick(&RootHost(config_envoy), &config);
            }
        })
    }));
    // Attempts waiting for a token go on when one came, or answer at the
    // end of their wait.
    wake::wake_all();
}

/// # Safety
/// Envoy's contract: the arrays hold the given counts for the call.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_callout_done(
    config_envoy: FilterConfigEnvoy,
    config: FilterConfigModule,
    callout_id: u64,
    result: u32,
    headers: *const EnvoyHeader,
    headers_size: usize,
    body_chunks: *const EnvoyBuffer,
    body_chunks_size: usize,
) {
    // SAFETY: as the function's contract says.
    let Some(config) = (unsafe { filter_config(config) }) else {
        return;
    };
    let id = config.id;
    let token = u32::try_from(callout_id).unwrap_or(u32::MAX);
    // Bounded: a token answer is small, a model list's page larger; a
    // longer one is refused as such.
    let owned = ROOTS.with(|roots| {
        roots
            .borrow()
            .get(&id)
            .is_some_and(|root| root.discovery.owns(token))
    });
    let limit = if owned {
        discovery::MAX_ANSWER_BYTES
    } else {
        llm_gateway_core::google_auth::MAX_ANSWER_BYTES
    };
    // SAFETY: as the function's contract says.
    let read = unsafe {
        callouts::read(
            result,
            headers,
            headers_size,
            body_chunks,
            body_chunks_size,
            limit,
        )
    };
    let (status, body) = read.map_or((None, Vec::new()), |a| (a.status, a.body));
    let _ = catch_unwind(AssertUnwindSafe(|| {
        ROOTS.with(|roots| {
            if let Some(root) = roots.borrow_mut().get_mut(&id) {
                let host = RootHost(config_envoy);
                let config = root.config.clone();
                if !root
                    .discovery
                    .on_response(&host, &config, token, status, &body)
                {
                    root.tokens.on_response(&host, token, status, &body);
                }
            }
        })
    }));
    // A token arrived: the attempts waiting for one go on at once.
    wake::wake_all();
}
