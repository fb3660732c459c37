//! Request decoding as the API server does it: a body (protobuf, JSON or YAML, chosen by
//! the first byte) decoded, then typed through the schema, defaulted, validated and
//! printed as a Table for one resource (chosen by the second byte). Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let [format, resource, body @ ..] = data else {
        return;
    };
    let decoded: Option<Value> = match format % 3 {
        0 => cairn_proto::decode_object(body).ok(),
        1 => serde_json::from_slice(body).ok(),
        _ => serde_yaml::from_slice::<serde_yaml::Value>(body)
            .ok()
            .and_then(|v| serde_json::to_value(v).ok()),
    };
    let Some(value) = decoded else {
        return;
    };
    let resources = cairn_api::registry::RESOURCES;
    let r = &resources[usize::from(*resource) % resources.len()];
    if let Ok(normalized) = cairn_api::schema::normalize(r, &value) {
        let mut obj = normalized.value;
        cairn_api::defaults::apply_defaults(r, &mut obj);
        let _ = cairn_api::validation::validate_create(r, &obj);
        let _ = cairn_api::validation::validate_update(r, &value, &obj);
        let _ = cairn_api::table::table(r, &[obj], chrono::Utc::now());
    }
});
