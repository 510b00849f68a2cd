//! An agent's artifact parts in the A2A 1.0 JSON form (`Part`: a oneof of `text`, `raw` (base64),
//! `url` and `data`, with `filename` and `mediaType`). The 0.3 form follows at the edge, from this.

use base64::Engine as _;
use portico_pipeline::ArtifactPart;
use serde_json::{Map, Value, json};

pub(crate) fn part_json(part: &ArtifactPart) -> Value {
    match part {
        ArtifactPart::Text(text) => json!({"text": text}),
        ArtifactPart::File {
            bytes,
            name,
            media_type,
        } => file(
            "raw",
            base64::engine::general_purpose::STANDARD.encode(bytes),
            name,
            media_type,
        ),
        ArtifactPart::FileUrl {
            url,
            name,
            media_type,
        } => file("url", url.clone(), name, media_type),
        ArtifactPart::Data(data) => json!({"data": data}),
    }
}

fn file(key: &str, content: String, name: &Option<String>, media_type: &Option<String>) -> Value {
    let mut part = Map::new();
    part.insert(key.into(), Value::String(content));
    if let Some(name) = name {
        part.insert("filename".into(), json!(name));
    }
    if let Some(media_type) = media_type {
        part.insert("mediaType".into(), json!(media_type));
    }
    Value::Object(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_kind_has_its_1_0_form() {
        let data = json!({"key": "value", "count": 42});
        let parts = [
            ArtifactPart::Text("hi".into()),
            ArtifactPart::File {
                bytes: b"hello".to_vec(),
                name: Some("output.txt".into()),
                media_type: Some("text/plain".into()),
            },
            ArtifactPart::FileUrl {
                url: "https://example.com/output.txt".into(),
                name: None,
                media_type: Some("text/plain".into()),
            },
            ArtifactPart::Data(data.as_object().unwrap().clone()),
        ];
        let json: Vec<Value> = parts.iter().map(part_json).collect();
        assert_eq!(
            json,
            vec![
                json!({"text": "hi"}),
                json!({"raw": "aGVsbG8=", "filename": "output.txt", "mediaType": "text/plain"}),
                json!({"url": "https://example.com/output.txt", "mediaType": "text/plain"}),
                json!({"data": {"key": "value", "count": 42}}),
            ]
        );
    }
}
