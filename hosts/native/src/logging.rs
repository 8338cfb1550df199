//! The `log` facade onto Envoy's log (`envoy_dynamic_module_callback_log`).

use super::*;

pub(crate) struct Logger;

pub(crate) fn level(level: log::Level) -> u32 {
    match level {
        log::Level::Trace => abi::LOG_TRACE,
        log::Level::Debug => abi::LOG_DEBUG,
        log::Level::Info => abi::LOG_INFO,
        log::Level::Warn => abi::LOG_WARN,
        log::Level::Error => abi::LOG_ERROR,
    }
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            envoy_log(record.level(), &record.args().to_string());
        }
    }

    fn flush(&self) {}
}

pub(crate) fn envoy_log(l: log::Level, message: &str) {
    // SAFETY: the buffer outlives the call.
    unsafe {
        abi::envoy_dynamic_module_callback_log(level(l), ModuleBuffer::of(message.as_bytes()))
    }
}

pub(crate) static LOGGER: Logger = Logger;
