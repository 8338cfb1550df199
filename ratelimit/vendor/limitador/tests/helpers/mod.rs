pub mod tests_limiter;
