//! A stream's callbacks: headers, local replies and resets, bodies,
//! metadata, filter state and attributes.

use super::*;

// ------------------------------------------------------------------ headers

callback! {
    fn envoy_dynamic_module_callback_http_get_header(
        filter: FilterEnvoy,
        header_type: u32,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
        index: usize,
        optional_size: *mut usize,
    ) -> bool {
        let key = unsafe { bytes(key) };
        let (count, value) = with(|w| {
            let map = w.stream(filter).and_then(|s| s.headers.get(header_type as usize));
            let Some(map) = map else {
                return (0, None);
            };
            let mut values = map.iter().filter(|(n, _)| n.eq_ignore_ascii_case(key));
            let count = values.clone().count();
            (count, values.nth(index).map(|(_, v)| buffer_of(v)))
        });
        unsafe {
            put(optional_size, count);
            put(result, value.unwrap_or(EnvoyBuffer::NULL));
        }
        value.is_some()
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_get_headers_size(
        filter: FilterEnvoy,
        header_type: u32,
    ) -> usize {
        with(|w| {
            let Some(stream) = w.stream(filter) else {
                return 0;
            };
            if stream.absurd_header_count {
                return usize::MAX;
            }
            stream.headers.get(header_type as usize).map_or(0, Vec::len)
        })
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_get_headers(
        filter: FilterEnvoy,
        header_type: u32,
        result: *mut EnvoyHeader,
    ) -> bool {
        let headers: Option<Vec<EnvoyHeader>> = with(|w| {
            let map = w.stream(filter)?.headers.get(header_type as usize)?;
            Some(
                map.iter()
                    .map(|(n, v)| EnvoyHeader {
                        key_ptr: n.as_ptr(),
                        key_length: n.len(),
                        value_ptr: v.as_ptr(),
                        value_length: v.len(),
                    })
                    .collect(),
            )
        });
        let Some(headers) = headers else {
            return false;
        };
        for (i, header) in headers.into_iter().enumerate() {
            // SAFETY: the module passes an array of `get_headers_size` entries.
            unsafe { put(result.add(i), header) };
        }
        true
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_set_header(
        filter: FilterEnvoy,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool {
        let key = unsafe { bytes(key) }.to_vec();
        // A null value removes the header.
        let value = (!value.ptr.is_null()).then(|| unsafe { bytes(value) }.to_vec());
        with(|w| {
            let map = w
                .stream(filter)
                .and_then(|s| s.headers.get_mut(header_type as usize));
            let Some(map) = map else {
                return false;
            };
            // Envoy's `setCopy`: the first value replaced, the others gone.
            let mut first = None;
            for (i, (name, _)) in map.iter().enumerate() {
                if name.eq_ignore_ascii_case(&key) {
                    first.get_or_insert(i);
                }
            }
            let mut i = 0;
            map.retain(|(name, _)| {
                i += 1;
                !name.eq_ignore_ascii_case(&key) || (value.is_some() && first == Some(i - 1))
            });
            match (first, value) {
                (Some(at), Some(value)) => map[at].1 = value,
                (None, Some(value)) => map.push((key, value)),
                (_, None) => {}
            }
            true
        })
    }
}

// ------------------------------------------------------------ local replies

/// A hook of the session of the module's filter is running now.
fn session_running(module: FilterModule) -> bool {
    // SAFETY: the module made this filter (`attach`) and has not destroyed
    // it: it is sending a reply on it.
    unsafe { module.cast::<crate::Filter>().as_ref() }
        .is_some_and(|filter| filter.inner.try_borrow_mut().is_err())
}

callback! {
    fn envoy_dynamic_module_callback_http_send_response(
        filter: FilterEnvoy,
        status_code: u32,
        headers: *const ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        details: ModuleBuffer,
    ) {
        let Some(module) = with(|w| w.stream(filter).and_then(|s| s.module)) else {
            return;
        };
        let reply = LocalReply {
            status: status_code,
            headers: unsafe { module_headers(headers, headers_size) },
            body: unsafe { bytes(body) }.to_vec(),
            details: unsafe { bytes(details) }.to_vec(),
            sent_inside_session: session_running(module),
        };
        with(|w| {
            if let Some(stream) = w.stream(filter) {
                stream.replies.push(reply.clone());
            }
        });
        // As Envoy's `sendLocalReply`: the filter hears of it, then the
        // reply goes through its response hooks, before this returns.
        unsafe {
            crate::envoy_dynamic_module_on_http_filter_local_reply(
                filter,
                module,
                status_code,
                buffer_of(&reply.details),
                false,
            );
        }
        let status = status_code.to_string();
        let mut response: HeaderList = vec![(b":status".to_vec(), status.into_bytes())];
        response.extend(reply.headers);
        with(|w| {
            if let Some(stream) = w.stream(filter) {
                stream.headers[RESPONSE] = response;
            }
        });
        let no_body = reply.body.is_empty();
        crate::envoy_dynamic_module_on_http_filter_response_headers(filter, module, no_body);
        if !no_body {
            Stream(filter).body_hook(1, &[&reply.body], || {
                crate::envoy_dynamic_module_on_http_filter_response_body(filter, module, true)
            });
        }
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_reset_stream(
        filter: FilterEnvoy,
        reason: u32,
        details: ModuleBuffer,
    ) {
        let details = unsafe { bytes(details) }.to_vec();
        with(|w| {
            if let Some(stream) = w.stream(filter) {
                stream.resets.push((reason, details));
            }
        });
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_clear_route_cache(filter: FilterEnvoy) {
        with(|w| {
            if let Some(stream) = w.stream(filter) {
                stream.route_cache_clears += 1;
            }
        });
    }
}

// ------------------------------------------------------------------- bodies

callback! {
    fn envoy_dynamic_module_callback_http_get_body_chunks_size(
        filter: FilterEnvoy,
        body_type: u32,
    ) -> usize {
        with(|w| w.stream(filter).and_then(|s| s.chunks(body_type)).map_or(0, |c| c.len()))
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_get_body_chunks(
        filter: FilterEnvoy,
        body_type: u32,
        result: *mut EnvoyBuffer,
    ) -> bool {
        let Some(chunks) = with(|w| w.stream(filter)?.chunks(body_type).map(|c| buffers(c))) else {
            return false;
        };
        for (i, chunk) in chunks.into_iter().enumerate() {
            // SAFETY: the module passes an array of `get_body_chunks_size` entries.
            unsafe { put(result.add(i), chunk) };
        }
        true
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_get_body_size(
        filter: FilterEnvoy,
        body_type: u32,
    ) -> usize {
        with(|w| {
            let stream = w.stream(filter)?;
            stream.body_size_asks += 1;
            stream.chunks(body_type).map(|c| c.iter().map(Vec::len).sum())
        })
        .unwrap_or(0)
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_append_body(
        filter: FilterEnvoy,
        body_type: u32,
        data: ModuleBuffer,
    ) -> bool {
        let data = unsafe { bytes(data) }.to_vec();
        with(|w| match w.stream(filter).and_then(|s| s.chunks(body_type)) {
            Some(chunks) => {
                chunks.push(data);
                true
            }
            None => false,
        })
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_drain_body(
        filter: FilterEnvoy,
        body_type: u32,
        number_of_bytes: usize,
    ) -> bool {
        with(|w| {
            let Some(chunks) = w.stream(filter).and_then(|s| s.chunks(body_type)) else {
                return false;
            };
            let mut left = number_of_bytes;
            for chunk in chunks.iter_mut() {
                let n = left.min(chunk.len());
                chunk.drain(..n);
                left -= n;
            }
            chunks.retain(|c| !c.is_empty());
            true
        })
    }
}

// The received chunk is never the buffered body here: no filter before
// this one buffers and resumes.
callback! {
    fn envoy_dynamic_module_callback_http_received_buffered_request_body(
        _filter: FilterEnvoy,
    ) -> bool {
        false
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_received_buffered_response_body(
        _filter: FilterEnvoy,
    ) -> bool {
        false
    }
}

// ------------------------------------- metadata, filter state, attributes

callback! {
    fn envoy_dynamic_module_callback_http_get_metadata_string(
        filter: FilterEnvoy,
        source: u32,
        ns: ModuleBuffer,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
    ) -> bool {
        let entry = unsafe { (bytes(ns).to_vec(), bytes(key).to_vec()) };
        // The endpoint's metadata is the only source the module reads.
        let value = with(|w| {
            let stream = w.stream(filter)?;
            (source == abi::METADATA_HOST)
                .then(|| stream.endpoint_metadata.get(&entry).map(|v| buffer_of(v)))
                .flatten()
        });
        unsafe { put(result, value.unwrap_or(EnvoyBuffer::NULL)) };
        value.is_some()
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_set_dynamic_metadata_string(
        filter: FilterEnvoy,
        ns: ModuleBuffer,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) {
        let (ns, key, value) = unsafe { (bytes(ns), bytes(key), bytes(value)) };
        with(|w| {
            if let Some(stream) = w.stream(filter) {
                stream
                    .dynamic_metadata
                    .insert((ns.to_vec(), key.to_vec()), value.to_vec());
            }
        });
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
        filter: FilterEnvoy,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool {
        let (key, value) = unsafe { (bytes(key).to_vec(), bytes(value).to_vec()) };
        with(|w| {
            let Some(stream) = w.stream(filter) else {
                return false;
            };
            let mut state = stream.filter_state.borrow_mut();
            // Read-only once set (1.40): a second write is refused.
            let stored = !state.values.contains_key(&key);
            if stored {
                state.values.insert(key.clone(), value.clone());
            }
            state.writes.push((key, value, stored));
            stored
        })
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_get_filter_state_bytes(
        filter: FilterEnvoy,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
    ) -> bool {
        let key = unsafe { bytes(key) };
        let value = with(|w| {
            let stream = w.stream(filter)?;
            let state = stream.filter_state.borrow();
            state.values.get(key).map(|v| buffer_of(v))
        });
        unsafe { put(result, value.unwrap_or(EnvoyBuffer::NULL)) };
        value.is_some()
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_get_attribute_string(
        filter: FilterEnvoy,
        attribute: u32,
        result: *mut EnvoyBuffer,
    ) -> bool {
        let value = with(|w| {
            let stream = w.stream(filter)?;
            stream.attribute_strings.get(&attribute).map(|v| buffer_of(v))
        });
        unsafe { put(result, value.unwrap_or(EnvoyBuffer::NULL)) };
        value.is_some()
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_get_attribute_int(
        filter: FilterEnvoy,
        attribute: u32,
        result: *mut u64,
    ) -> bool {
        let value = with(|w| w.stream(filter)?.attribute_ints.get(&attribute).copied());
        if let Some(value) = value {
            unsafe { put(result, value) };
        }
        value.is_some()
    }
}
