//! Custom resources whose CRD converts between versions with a webhook
//! (`spec.conversion.strategy: Webhook`): objects are sent in a ConversionReview
//! (`apiextensions.k8s.io/v1`) to the CRD's webhook, through the same HTTPS caller as
//! admission webhooks, and the converted objects are checked as upstream checks them
//! (count, apiVersion and kind, metadata other than labels and annotations kept).
//!
//! The read paths that render objects are synchronous, so the call is made with
//! `block_in_place` on the multi-threaded runtime the server runs on (a current-thread
//! runtime gets an error, never a panic).

use std::sync::Arc;

use bytes::Bytes;
use cairn_api::registry::ResourceInfo;
use cairn_api::status::Status;
use serde_json::{json, Value};

use crate::admission::webhook::{Caller, Hook};

/// A CRD's conversion webhook and how to reach it.
#[derive(Clone)]
pub struct ConversionWebhook {
    pub hook: Arc<Hook>,
    pub caller: Arc<dyn Caller>,
}

/// `<group>/<version>, Kind=<kind>`, as Go prints a GroupVersionKind.
fn gvk(obj: &Value) -> String {
    format!(
        "{}, Kind={}",
        obj["apiVersion"].as_str().unwrap_or(""),
        obj["kind"].as_str().unwrap_or("")
    )
}

fn failed(message: String) -> Status {
    Status::new(
        500,
        "InternalError",
        format!("Internal error occurred: {message}"),
    )
}

impl ConversionWebhook {
    /// Converts `objects` (all of one kind and version) to `to`'s version.
    pub fn convert(&self, objects: Vec<Value>, to: &ResourceInfo) -> Result<Vec<Value>, Status> {
        let desired = to.api_version();
        let pending: Vec<usize> = (0..objects.len())
            .filter(|&i| objects[i]["apiVersion"].as_str() != Some(desired.as_str()))
            .collect();
        let Some(&first) = pending.first() else {
            return Ok(objects);
        };
        let what = gvk(&objects[first]);
        let sent: Vec<Value> = pending.iter().map(|&i| objects[i].clone()).collect();
        let converted = self
            .call_blocking(sent.clone(), &desired)
            .map_err(|e| failed(format!("conversion webhook for {what} failed: {e}")))?;
        let converted = check(sent, converted, &desired, to.kind)
            .map_err(|e| failed(format!("conversion webhook for {what} returned {e}")))?;
        let mut objects = objects;
        for (i, c) in pending.into_iter().zip(converted) {
            objects[i] = c;
        }
        Ok(objects)
    }

    /// Converts one object (see [`ConversionWebhook::convert`]).
    pub fn convert_one(&self, object: Value, to: &ResourceInfo) -> Result<Value, Status> {
        self.convert(vec![object], to)?
            .into_iter()
            .next()
            .ok_or_else(|| failed("conversion webhook returned no object".into()))
    }

    fn call_blocking(&self, objects: Vec<Value>, desired: &str) -> Result<Vec<Value>, String> {
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| "no async runtime to call the webhook from".to_string())?;
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err("conversion webhooks need the multi-threaded runtime".into());
        }
        tokio::task::block_in_place(|| handle.block_on(self.call(objects, desired)))
    }

    async fn call(&self, objects: Vec<Value>, desired: &str) -> Result<Vec<Value>, String> {
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}});
        let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
        let response = self
            .caller
            .call(&self.hook, Bytes::from(body))
            .await
            .map_err(|e| e.to_string())?;
        parse_response(&response, &uid)
    }
}

/// The converted objects of a ConversionReview response.
fn parse_response(body: &[u8], uid: &str) -> Result<Vec<Value>, String> {
    let review: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if review["apiVersion"] != "apiextensions.k8s.io/v1" || review["kind"] != "ConversionReview" {
        return Err(format!(
            "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {}",
            gvk(&review)
        ));
    }
    let response = &review["response"];
    if !response.is_object() {
        return Err("no response provided".into());
    }
    if response["uid"].as_str() != Some(uid) {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            response["uid"].as_str().unwrap_or("")
        ));
    }
    if response["result"]["status"] != "Success" {
        return Err(format!(
            "conversion failed: {}",
            response["result"]["message"].as_str().unwrap_or("")
        ));
    }
    Ok(response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// Upstream's checks of converted objects: one per object sent, in the desired version,
/// of the same kind; only labels and annotations of the metadata may change (the rest is
/// restored from what was sent).
fn check(
    sent: Vec<Value>,
    converted: Vec<Value>,
    desired: &str,
    kind: &str,
) -> Result<Vec<Value>, String> {
    if converted.len() != sent.len() {
        return Err(format!(
            "{} objects, expected {}",
            converted.len(),
            sent.len()
        ));
    }
    let mut out = Vec::with_capacity(sent.len());
    for (i, (original, mut c)) in sent.into_iter().zip(converted).enumerate() {
        if c["apiVersion"].as_str() != Some(desired) {
            return Err(format!(
                "invalid converted object at index {i}: invalid apiVersion {:?}, expected {desired:?}",
                c["apiVersion"].as_str().unwrap_or("")
            ));
        }
        if c["kind"].as_str() != Some(kind) {
            return Err(format!(
                "invalid converted object at index {i}: invalid kind {:?}, expected {kind:?}",
                c["kind"].as_str().unwrap_or("")
            ));
        }
        let mut meta = original["metadata"].clone();
        for key in ["labels", "annotations"] {
            match c["metadata"].get(key) {
                Some(v) => meta[key] = v.clone(),
                None => {
                    if let Some(m) = meta.as_object_mut() {
                        m.remove(key);
                    }
                }
            }
        }
        c["metadata"] = meta;
        out.push(c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(uid: &str, objects: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": objects}}))
        .unwrap_or_default()
    }

    #[test]
    fn responses_are_checked() {
        let ok = parse_response(&response("u", json!([{"a": 1}])), "u");
        assert_eq!(ok, Ok(vec![json!({"a": 1})]));
        assert!(parse_response(&response("x", json!([])), "u")
            .is_err_and(|e| e.contains("expected response.uid")));
        let failure = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Failure", "message": "no way"}}});
        assert_eq!(
            parse_response(failure.to_string().as_bytes(), "u"),
            Err("conversion failed: no way".to_string())
        );
    }

    #[test]
    fn converted_objects_keep_server_metadata() {
        let sent = vec![json!({"apiVersion": "g/v1", "kind": "W",
            "metadata": {"name": "a", "uid": "1", "resourceVersion": "5", "labels": {"x": "1"}}})];
        let converted = vec![json!({"apiVersion": "g/v2", "kind": "W",
            "metadata": {"name": "renamed", "labels": {"y": "2"}}, "spec": {"replicas": 3}})];
        let out = check(sent.clone(), converted, "g/v2", "W").unwrap_or_default();
        assert_eq!(
            out[0]["metadata"],
            json!({"name": "a", "uid": "1", "resourceVersion": "5", "labels": {"y": "2"}})
        );
        assert_eq!(out[0]["spec"]["replicas"], 3);
        let wrong = vec![json!({"apiVersion": "g/v1", "kind": "W", "metadata": {}})];
        assert!(check(sent.clone(), wrong, "g/v2", "W")
            .is_err_and(|e| e.contains("invalid apiVersion")));
        assert_eq!(
            check(sent, vec![], "g/v2", "W"),
            Err("0 objects, expected 1".to_string())
        );
    }
}
