//! An agent's artifact parts in the A2A 1.0 JSON form (`Part`: a oneof of `text`, `raw` (base64),
//! `url` and `data`, with `filename` and `mediaType`). The 0.3 form follows at the edge, from this.

use base64::Engine as _;
use portico_a2a_client::protocol::v1;
use portico_pipeline::ArtifactPart;

pub(crate) fn part_of(part: ArtifactPart) -> v1::Part {
    let file = |content, filename, media_type| v1::Part {
        content,
        metadata: None,
        filename,
        media_type,
    };
    match part {
        ArtifactPart::Text(text) => v1::Part::text(text),
        ArtifactPart::File {
            bytes,
            name,
            media_type,
        } => file(
            v1::PartContent::Raw(base64::engine::general_purpose::STANDARD.encode(bytes)),
            name,
            media_type,
        ),
        ArtifactPart::FileUrl {
            url,
            name,
            media_type,
        } => file(v1::PartContent::Url(url), name, media_type),
        ArtifactPart::Data(data) => v1::Part {
            content: v1::PartContent::Data(serde_json::Value::Object(data)),
            ..v1::Part::text("")
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

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
        let json: Vec<Value> = parts
            .into_iter()
            .map(|p| serde_json::to_value(part_of(p)).unwrap())
            .collect();
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
