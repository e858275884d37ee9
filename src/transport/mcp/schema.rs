//! A tool's input schema, cut from its REST operation in the OpenAPI document: the path
//! and query parameters and the JSON body's properties become one object, the
//! `Idempotency-Key` header becomes `idempotency_key` (as in frames), fields the tool
//! fills itself are left out, and the component schemas it refers to travel along as
//! `$defs`. So a field is defined once, by the type REST decodes, for every transport.

use std::collections::BTreeSet;

use rmcp::model::JsonObject;
use serde_json::{Map, Value, json};

use super::tools::{Source, Spec};

const COMPONENTS: &str = "#/components/schemas/";

/// The input schema of `spec`, from the OpenAPI document `doc` (as JSON).
pub fn input(doc: &Value, spec: &Spec) -> JsonObject {
    let (op, body) = match spec.source {
        Source::Rest(method, path) => {
            let op = &doc["paths"][path][method];
            (
                op,
                &op["requestBody"]["content"]["application/json"]["schema"],
            )
        }
        Source::Component(name) => (&Value::Null, &doc["components"]["schemas"][name]),
    };
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut add = |name: String, schema: Value, needed: bool| {
        if spec.caller_fields.contains(&name.as_str()) || spec.fixed.contains(&name.as_str()) {
            return;
        }
        // The first definition of a field is the tool's: a path parameter renamed to a
        // body field (respond's `original_message_id`) is a required string, not the
        // body's optional, nullable echo of the path.
        if properties.contains_key(&name) {
            return;
        }
        if needed && !required.contains(&Value::String(name.clone())) {
            required.push(Value::String(name.clone()));
        }
        properties.insert(name, schema);
    };
    for param in op["parameters"].as_array().into_iter().flatten() {
        let name = param["name"].as_str().unwrap_or_default();
        let mut schema = param["schema"].clone();
        if let (Some(description), Value::Object(fields)) =
            (param["description"].as_str(), &mut schema)
        {
            fields.insert("description".into(), description.into());
        }
        match (param["in"].as_str(), name) {
            (Some("header"), "Idempotency-Key") => add("idempotency_key".into(), schema, false),
            (Some("path"), "team_id") => {}
            (Some("path"), name) => {
                let name = spec
                    .renames
                    .iter()
                    .find(|(from, _)| *from == name)
                    .map_or(name, |(_, to)| to);
                add(name.to_owned(), schema, true);
            }
            (Some("query"), name) => add(name.to_owned(), schema, param["required"] == true),
            _ => {}
        }
    }
    let body = resolve(doc, body);
    if let Some(fields) = body["properties"].as_object() {
        let needed: Vec<&str> = body["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for (name, schema) in fields {
            add(
                name.clone(),
                schema.clone(),
                needed.contains(&name.as_str()),
            );
        }
    }
    let description = body["description"].as_str();
    object_schema(doc, properties, required, description)
}

/// An object schema of `properties`, with the components they refer to as `$defs`.
fn object_schema(
    doc: &Value,
    properties: Map<String, Value>,
    required: Vec<Value>,
    description: Option<&str>,
) -> JsonObject {
    let mut schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    if let Some(description) = description {
        schema["description"] = description.into();
    }
    let mut defs = Map::new();
    collect_defs(doc, &schema, &mut defs, &mut BTreeSet::new());
    defs.remove(switchboard_types::openapi::JSON_VALUE);
    if !defs.is_empty() {
        schema["$defs"] = Value::Object(defs);
    }
    any_json_plainly(&mut schema);
    rewrite_refs(&mut schema);
    portable_nullables(&mut schema);
    match schema {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

/// The document's recursive "any JSON without NUL" (`JsonValue`) → `{}`: tool hosts turn
/// schemas into types, and a recursive one sent CrewAI's into endless recursion. The
/// NUL rule stays the server's (a tool error names it); the value is any JSON.
fn any_json_plainly(schema: &mut Value) {
    let json_value = format!("{COMPONENTS}{}", switchboard_types::openapi::JSON_VALUE);
    let is_json_value = |v: &Value| v["$ref"].as_str() == Some(json_value.as_str());
    match schema {
        Value::Object(fields) => {
            if fields
                .get("allOf")
                .and_then(Value::as_array)
                .is_some_and(|all| all.len() == 1 && is_json_value(&all[0]))
            {
                fields.remove("allOf");
            }
            for value in fields.values_mut() {
                if is_json_value(value) {
                    *value = json!({});
                } else {
                    any_json_plainly(value);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                if is_json_value(item) {
                    *item = json!({});
                } else {
                    any_json_plainly(item);
                }
            }
        }
        _ => {}
    }
}

/// `"type": ["string", "null"]` → `"anyOf": [{"type": "string", …}, {"type": "null"}]`:
/// the same contract, in the form hosts that map tool schemas onto a one-type dialect
/// (function declarations of some model providers) accept; the MCP Inspector's
/// `--strict` check asks for it.
fn portable_nullables(schema: &mut Value) {
    match schema {
        Value::Object(fields) => {
            for value in fields.values_mut() {
                portable_nullables(value);
            }
            let Some(Value::Array(types)) = fields.get("type") else {
                return;
            };
            let others: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
            if others.len() != 1 || others.len() == types.len() {
                return;
            }
            let mut branch = std::mem::take(fields);
            let mut outer = Map::new();
            for key in ["description", "default", "example", "examples"] {
                if let Some(value) = branch.remove(key) {
                    outer.insert(key.to_owned(), value);
                }
            }
            branch.insert("type".into(), others[0].clone());
            outer.insert(
                "anyOf".into(),
                json!([Value::Object(branch), {"type": "null"}]),
            );
            *fields = outer;
        }
        Value::Array(items) => items.iter_mut().for_each(portable_nullables),
        _ => {}
    }
}

/// A schema, or the component it refers to.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix(COMPONENTS))
    {
        Some(name) => &doc["components"]["schemas"][name],
        None => schema,
    }
}

/// Every component `schema` refers to, directly or through others.
fn collect_defs(
    doc: &Value,
    schema: &Value,
    defs: &mut Map<String, Value>,
    seen: &mut BTreeSet<String>,
) {
    match schema {
        Value::Object(fields) => {
            if let Some(name) = fields
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(COMPONENTS))
                && seen.insert(name.to_owned())
            {
                let component = doc["components"]["schemas"][name].clone();
                collect_defs(doc, &component, defs, seen);
                defs.insert(name.to_owned(), component);
            }
            for value in fields.values() {
                collect_defs(doc, value, defs, seen);
            }
        }
        Value::Array(items) => {
            for item in items {
                collect_defs(doc, item, defs, seen);
            }
        }
        _ => {}
    }
}

/// `#/components/schemas/X` → `#/$defs/X`.
fn rewrite_refs(schema: &mut Value) {
    match schema {
        Value::Object(fields) => {
            for (key, value) in fields.iter_mut() {
                match value {
                    Value::String(r) if key == "$ref" => {
                        if let Some(name) = r.strip_prefix(COMPONENTS) {
                            *r = format!("#/$defs/{name}");
                        }
                    }
                    other => rewrite_refs(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}
