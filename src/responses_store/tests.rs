use serde_json::json;

use super::*;
use crate::shared_state::cas::tests::MemoryStore;

const NOW: u64 = 1_700_000_000;

fn entry(id: &str, text: &str) -> Entry {
    Entry {
        id: id.to_owned(),
        prev: None,
        input: vec![json!({"type": "message", "role": "user", "content": text})],
        response: json!({"id": id, "object": "response", "output": []}),
    }
}

fn bounds(max_entries: u32, max_bytes: u64) -> Bounds {
    Bounds {
        max_entries,
        max_bytes,
        ..Bounds::default()
    }
}

fn ns(owner: &str) -> Namespace {
    namespace(owner)
}

fn stored(put: Put) -> Usage {
    match put {
        Put::Stored(usage) => usage,
        other => panic!("not stored: {other:?}"),
    }
}

#[test]
fn ids_are_the_gateways_unguessable_and_name_their_items_response() {
    let a = new_id(1);
    let b = new_id(1);
    assert_ne!(a, b);
    assert!(is_gateway_id(&a) && is_gateway_id(&b));
    assert!(!is_gateway_id(
        "resp_68af0123456789abcdef0123456789abcdef0123456789ab"
    ));
    assert!(!is_gateway_id("resp_gw12"));
    let base = a.strip_prefix("resp_").unwrap();
    assert_eq!(response_of_item(&format!("msg_0_{base}")), Some(a.clone()));
    assert_eq!(response_of_item(&format!("fc_12_{base}")), Some(a));
    assert_eq!(response_of_item("msg_abc"), None);
    assert_eq!(response_of_item("msg_0_chatcmpl-1"), None);
}

#[test]
fn an_entry_is_found_by_its_owner_only_until_it_expires_or_is_deleted() {
    let store = MemoryStore::default();
    let b = bounds(8, 1 << 20);
    let id = new_id(0);
    let usage = stored(put(
        &store,
        &b,
        &ns("team-a"),
        &entry(&id, "hi"),
        false,
        NOW,
    ));
    assert_eq!(usage.entries, 1);
    assert!(usage.bytes > 0);
    let found = get(&store, &b, &ns("team-a"), &id, NOW + 1).unwrap();
    assert_eq!(found, (entry(&id, "hi"), false));
    // Another key, an id never stored, an expired entry: not there.
    assert_eq!(get(&store, &b, &ns("team-b"), &id, NOW + 1), None);
    assert_eq!(get(&store, &b, &ns("team-a"), &new_id(0), NOW + 1), None);
    assert_eq!(
        get(&store, &b, &ns("team-a"), &id, NOW + b.ttl_seconds),
        None
    );
    // Another key cannot delete it; its owner can, once.
    assert_eq!(delete(&store, &b, &ns("team-b"), &id, NOW), None);
    assert_eq!(
        delete(&store, &b, &ns("team-a"), &id, NOW),
        Some(Usage::default())
    );
    assert_eq!(get(&store, &b, &ns("team-a"), &id, NOW), None);
    assert_eq!(delete(&store, &b, &ns("team-a"), &id, NOW), None);
}

#[test]
fn a_full_store_evicts_and_never_grows_its_keys() {
    let store = MemoryStore::default();
    let b = bounds(3, 1 << 20);
    let ids: Vec<String> = (0..4).map(new_id).collect();
    for id in &ids {
        stored(put(&store, &b, &ns("k"), &entry(id, "x"), false, NOW));
    }
    // None was read: the oldest went first.
    assert_eq!(get(&store, &b, &ns("k"), &ids[0], NOW), None);
    for id in &ids[1..] {
        assert!(get(&store, &b, &ns("k"), id, NOW).is_some());
    }
    // Never more keys than slots and the index.
    assert_eq!(store.entries.borrow().len(), 4);
}

#[test]
fn an_entry_over_its_bound_is_not_stored_and_nothing_is_evicted_for_it() {
    let store = MemoryStore::default();
    let b = Bounds {
        max_entry_bytes: 300,
        ..bounds(4, 1 << 20)
    };
    let small = new_id(0);
    stored(put(&store, &b, &ns("k"), &entry(&small, "x"), false, NOW));
    let big = new_id(0);
    assert_eq!(
        put(
            &store,
            &b,
            &ns("k"),
            &entry(&big, &"y".repeat(400)),
            false,
            NOW
        ),
        Put::TooLarge
    );
    assert!(get(&store, &b, &ns("k"), &small, NOW).is_some());
    assert!(get(&store, &b, &ns("k"), &big, NOW).is_none());
}

#[test]
fn a_disabled_store_keeps_nothing() {
    let store = MemoryStore::default();
    let b = Bounds {
        enabled: false,
        ..Bounds::default()
    };
    let id = new_id(0);
    assert_eq!(
        put(&store, &b, &ns("k"), &entry(&id, "x"), false, NOW),
        Put::Failed
    );
    assert_eq!(store.calls.get(), 0);
    assert!(get(&store, &b, &ns("k"), &id, NOW).is_none());
}

mod resolving {
    use super::*;
    use crate::responses_store::resolve::*;

    fn stored(id: &str, prev: Option<&str>, said: &str, answered: &str) -> Entry {
        let base = id.strip_prefix("resp_").unwrap();
        Entry {
            prev: prev.map(str::to_owned),
            input: input_items(vec![json!({"role": "user", "content": said})], id),
            response: json!({"id": id, "status": "completed", "output": [
                {"type": "message", "id": format!("msg_0_{base}"), "role": "assistant",
                 "content": [{"type": "output_text", "text": answered, "annotations": []}]}]}),
            ..entry(id, "")
        }
    }

    #[test]
    fn a_chain_becomes_the_whole_conversation_without_earlier_instructions() {
        let (a, b) = (new_id(1), new_id(2));
        let entries = [
            stored(&a, None, "one", "two"),
            stored(&b, Some(&a), "three", "four"),
        ];
        let lookup = |id: &str| entries.iter().find(|e| e.id == id).cloned();
        let body = json!({"model": "m", "input": "five", "instructions": "now",
                          "previous_response_id": b});
        let resolved = resolve(body.to_string().as_bytes(), lookup)
            .unwrap()
            .unwrap();
        assert_eq!(resolved.previous.as_deref(), Some(b.as_str()));
        let sent: Value = serde_json::from_slice(&resolved.body).unwrap();
        assert!(sent.get("previous_response_id").is_none());
        assert_eq!(sent["instructions"], "now");
        let texts: Vec<&str> = sent["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["content"][0]["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["one", "two", "three", "four", "five"]);
        // Without the gateway's ids: a vendor that keeps items would look them up.
        assert!(!String::from_utf8_lossy(&resolved.body).contains("_gw"));
        assert_eq!(resolved.input.len(), 1);
        // A chain whose start is gone, an unknown id: OpenAI's error.
        let gone = |id: &str| (id == b).then(|| entries[1].clone());
        let e = resolve(body.to_string().as_bytes(), gone).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("previous_response_id"));
        assert!(e.message.contains(&a));
        // A vendor's id, no reference: nothing to do.
        let theirs = json!({"model": "m", "input": "x", "previous_response_id": "resp_1"});
        assert!(resolve(theirs.to_string().as_bytes(), lookup)
            .unwrap()
            .is_none());
        assert!(!references_state(br#"{"model":"m","input":"x"}"#));
    }

    #[test]
    fn an_item_reference_is_the_stored_item() {
        let a = new_id(3);
        let entries = [stored(&a, None, "one", "two")];
        let lookup = |id: &str| entries.iter().find(|e| e.id == id).cloned();
        let base = a.strip_prefix("resp_").unwrap();
        let body = json!({"model": "m", "input": [
            {"type": "item_reference", "id": format!("in_0_{base}")},
            {"type": "item_reference", "id": format!("msg_0_{base}")},
            {"type": "item_reference", "id": "msg_openai"}]});
        let resolved = resolve(body.to_string().as_bytes(), lookup)
            .unwrap()
            .unwrap();
        let sent: Value = serde_json::from_slice(&resolved.body).unwrap();
        assert_eq!(sent["input"][0]["content"][0]["text"], "one");
        assert_eq!(sent["input"][1]["content"][0]["text"], "two");
        assert!(sent["input"][1].get("id").is_none());
        // What is stored keeps the ids (input_items lists them).
        assert_eq!(resolved.input[1]["id"], format!("msg_0_{base}"));
        // A vendor's item is left to the vendor.
        assert_eq!(sent["input"][2]["id"], "msg_openai");
        let missing = json!({"model": "m", "input": [
            {"type": "item_reference", "id": format!("msg_7_{base}")}]});
        let e = resolve(missing.to_string().as_bytes(), lookup).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("input[0]"));
    }

    #[test]
    fn a_stream_keeps_only_its_terminal_response_within_the_bound() {
        let events = [
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\"}}\n\n",
            "event: response.output_text.delta\ndata: {\"delta\":\"hi\"}\n\nevent: response.comp",
            "leted\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[]}}\n\n",
        ];
        let mut capture = Capture::new(true, 200);
        for event in events {
            assert!(!capture.complete());
            capture.feed(event.as_bytes());
        }
        assert!(capture.complete());
        assert_eq!(capture.finish().unwrap()["id"], "r");
        let mut small = Capture::new(true, 40);
        for event in events {
            small.feed(event.as_bytes());
        }
        assert!(small.finish().is_none());
        let mut whole = Capture::new(false, 100);
        whole.feed(br#"{"id":"r","status":"#);
        whole.feed(br#""incomplete"}"#);
        assert_eq!(whole.finish().unwrap()["status"], "incomplete");
    }

    #[test]
    fn input_items_page_as_openai() {
        let a = new_id(4);
        let mut e = stored(&a, None, "one", "x");
        e.input = input_items(
            ["one", "two", "three"]
                .iter()
                .map(|t| json!({"role": "user", "content": t}))
                .collect(),
            &a,
        );
        let page = |q: &str| -> Value {
            serde_json::from_slice(&input_items_page(&e, q).unwrap()).unwrap()
        };
        let first = page("limit=2");
        assert_eq!(first["data"][0]["content"][0]["text"], "three");
        assert_eq!(first["has_more"], true);
        let last_id = first["last_id"].as_str().unwrap().to_owned();
        let rest = page(&format!("limit=2&after={last_id}"));
        assert_eq!(rest["data"].as_array().unwrap().len(), 1);
        assert_eq!(rest["has_more"], false);
        assert_eq!(page("order=asc")["data"][0]["content"][0]["text"], "one");
        assert!(input_items_page(&e, "limit=0").is_err());
        assert!(input_items_page(&e, "order=up").is_err());
    }
}

#[test]
fn bounds_are_checked() {
    assert!(Bounds::default().validate().is_ok());
    for bad in [
        Bounds {
            max_entries: 0,
            ..Bounds::default()
        },
        Bounds {
            max_entries: MAX_ENTRIES + 1,
            ..Bounds::default()
        },
        Bounds {
            max_bytes: 0,
            ..Bounds::default()
        },
        Bounds {
            ttl_seconds: 0,
            ..Bounds::default()
        },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
}
