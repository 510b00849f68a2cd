#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| portico_fuzz_targets::mcp_http(data));
