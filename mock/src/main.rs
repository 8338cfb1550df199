//! mock-provider: a mock LLM vendor API speaking the real wire formats of
//! OpenAI Chat Completions, Azure OpenAI, Anthropic Messages, Google Gemini,
//! AWS Bedrock (Converse, and InvokeModel for Claude) and Alibaba DashScope, for the gateway's integration
//! tests and benchmarks; and each vendor's embeddings endpoint (embeddings/).
//!
//! Usage: mock-provider [--listen ADDR] [--fast] [--verbose] [--aws-credentials ID:SECRET]
//!   --listen ADDR  address to bind (default 127.0.0.1:0, port 0 = any free)
//!   --aws-credentials ID:SECRET  Bedrock requests must carry a valid SigV4
//!                  signature made with these (default: any authorization)
//!   --aws-region R  the region Bedrock signatures must be scoped to
//!                  (repeatable; default us-east-1)
//!   --api-key VENDOR=KEY  the one key VENDOR (openai, azure, anthropic,
//!                  gemini, dashscope) accepts (default: the keys of
//!                  envoy/gateway.yaml, e.g. sk-mock-openai)
//!   --vertex-token TOKEN  the Google access token Vertex AI accepts
//!                  besides those its token endpoint issued (default
//!                  ya29.mock-vertex-token)
//!   --google-token-ttl SECS  lifetime of the tokens its Google token
//!                  endpoint and metadata server issue (default 3600)
//!   --google-public-key FILE  a service account's public key (PEM) whose
//!                  JWTs the token endpoint takes besides the test key's
//!                  (repeatable; `make run` makes a key pair at start-up)
//!   --fast         benchmark mode: fixed answers, no recording
//!   --verbose      log each request to stderr
//!
//! After binding it prints `listening HOST:PORT` on stdout.

mod answer;
mod anthropic;
mod azure;
mod bedrock;
mod bedrock_invoke;
mod claude_modes;
mod dashscope;
mod dialect;
mod embeddings;
mod fast;
mod gemini;
mod google_auth;
mod gzip;
mod http;
mod keys;
mod models;
mod oauth;
mod openai;
mod openai_parts;
mod record;
mod responses;
mod scenario;
mod server;
mod sigv4;
mod sse;
mod vertex;

#[cfg(test)]
mod wire_tests;

use std::io::Write;
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;

use sigv4::Credentials;

const USAGE: &str = "usage: mock-provider [--listen ADDR] [--fast] [--verbose] \
     [--aws-credentials ID:SECRET] [--aws-region REGION]... [--api-key VENDOR=KEY]... [--vertex-token TOKEN] [--google-token-ttl SECS] [--google-public-key FILE]...";

fn main() -> ExitCode {
    let mut listen = "127.0.0.1:0".to_owned();
    let mut fast = false;
    let mut verbose = false;
    let mut aws = None;
    let mut regions = Vec::new();
    let mut api_keys = Vec::new();
    let mut vertex_token = None;
    let mut token_ttl = None;
    let mut public_keys = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => match args.next() {
                Some(addr) => listen = addr,
                None => return usage_error("--listen needs an address"),
            },
            "--fast" => fast = true,
            "--aws-credentials" => match args.next().as_deref().and_then(Credentials::parse) {
                Some(c) => aws = Some(c),
                None => return usage_error("--aws-credentials needs ID:SECRET"),
            },
            "--aws-region" => match args.next() {
                Some(r) if !r.is_empty() => regions.push(r),
                _ => return usage_error("--aws-region needs a region"),
            },
            "--api-key" => match args.next().as_deref().and_then(keys::parse) {
                Some(k) => api_keys.push(k),
                None => return usage_error("--api-key needs VENDOR=KEY"),
            },
            "--vertex-token" => match args.next() {
                Some(t) if !t.is_empty() => vertex_token = Some(t),
                _ => return usage_error("--vertex-token needs a token"),
            },
            "--google-token-ttl" => match args.next().and_then(|t| t.parse::<u64>().ok()) {
                Some(t) if t > 0 => token_ttl = Some(t),
                _ => return usage_error("--google-token-ttl needs a number of seconds"),
            },
            "--google-public-key" => match args.next().map(std::fs::read_to_string) {
                Some(Ok(pem)) => public_keys.push(pem),
                Some(Err(e)) => return usage_error(&format!("--google-public-key: {e}")),
                None => return usage_error("--google-public-key needs a file"),
            },
            "--verbose" => verbose = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage_error(&format!("unknown argument {other}")),
        }
    }

    let listener = match TcpListener::bind(&listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mock-provider: cannot listen on {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("mock-provider: {e}");
            return ExitCode::FAILURE;
        }
    };
    keys::configure(api_keys);
    google_auth::configure(vertex_token);
    if let Err(e) = oauth::configure(token_ttl, &public_keys) {
        return usage_error(&format!("--google-public-key: {e}"));
    }
    if regions.is_empty() {
        regions.push("us-east-1".to_owned());
    }
    let aws = aws.map(|credentials| sigv4::Verifier {
        credentials,
        regions,
    });
    let state = Arc::new(server::State::new(fast, verbose, aws));
    // Tests wait for exactly this line to learn the port.
    let mut out = std::io::stdout();
    let _ = writeln!(out, "listening {addr}");
    let _ = out.flush();

    server::serve(listener, state);
    ExitCode::SUCCESS
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("mock-provider: {msg}\n{USAGE}");
    ExitCode::from(2)
}
