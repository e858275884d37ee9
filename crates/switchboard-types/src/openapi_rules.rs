//! The rules [`crate::openapi`]'s table cannot write field by field: no NUL in any string
//! of any request (free-form JSON included, at any depth), and the rules between fields.
//!
//! A rule the server enforces but the document does not state is a request a generated
//! client builds and the server refuses: schemathesis built 23 kinds of them (a NUL in a
//! `data` value, an attachment with both `url` and `data`, a watch with neither list).
//! What a JSON Schema can say is said here; what it cannot (a cursor the server issued,
//! a deadline in the future, a body id that must match the path) is listed in
//! `tests/interop/st_hooks.py`, which fails on any other refusal of a request the
//! document allows.

use serde_json::json;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{
    AdditionalProperties, AnyOf, Array, ArrayItems, Object, Schema, SchemaType, Type,
};
use utoipa::openapi::{OpenApi, Ref, RefOr};

use crate::budgets::MAX_BUDGET;
use crate::loops::MIN_CYCLE_MESSAGES;
use crate::openapi::{JSON_VALUE, NO_NUL};

/// Rules between fields, as JSON Schema keywords added to the named object schema:
/// (schema, keyword, value). utoipa's `Object` has no `oneOf`/`anyOf` of its own; its
/// extensions are written flat into the schema, so they carry them.
fn between_fields() -> Vec<(&'static str, &'static str, serde_json::Value)> {
    // The server's own tags, written with `not` because a pattern that says "does not
    // start with" needs a look-ahead, which not every validator's regex has.
    let reserved = format!(
        "^{}",
        crate::publish::RESERVED_TAG_PREFIX.replace('.', r"\.")
    );
    vec![
        (
            "Publish",
            "not",
            json!({"required": ["cause_by"], "properties": {"cause_by": {"type": "string", "pattern": reserved}}}),
        ),
        (
            "Attachment",
            "oneOf",
            json!([
                {"required": ["url"], "properties": {"url": {"type": "string", "pattern": NO_NUL}}},
                {"required": ["data"], "properties": {"data": {"type": "string", "pattern": NO_NUL}}},
            ]),
        ),
        (
            "SendMessage",
            "anyOf",
            json!([
                {"properties": {"response_deadline": {"type": "null"}}},
                {"required": ["requires_response"],
                 "properties": {"requires_response": {"const": true}}},
            ]),
        ),
        // A task goes to a named agent or is offered to a role, not both.
        (
            "TaskRequest",
            "anyOf",
            json!([
                {"properties": {"target_agent_id": {"type": "null"}}},
                {"properties": {"assignee_role": {"type": "null"}}},
            ]),
        ),
        (
            "SetWatch",
            "anyOf",
            json!([{"required": ["addresses"]}, {"required": ["watch"]}]),
        ),
        // `0` (off) or MIN_CYCLE_MESSAGES and up: a range with a hole, which a field's
        // own minimum cannot say (the spec fuzzer sent 1).
        (
            "LoopGuard",
            "anyOf",
            json!([
                {"properties": {"cycle_messages": {"const": 0}}},
                {"properties": {"cycle_messages": {"minimum": MIN_CYCLE_MESSAGES}}},
            ]),
        ),
    ]
}

/// Writes the rules into `doc`; adds a line to `problems` for a rule whose schema is
/// missing.
pub(crate) fn state_the_rest(doc: &mut OpenApi, problems: &mut Vec<String>) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    for (name, keyword, value) in between_fields() {
        match components.schemas.get_mut(name) {
            Some(RefOr::T(Schema::Object(object))) => {
                let mut extensions = object.extensions.take().unwrap_or_default();
                extensions.merge(Extensions::from_iter([(keyword, value)]));
                object.extensions = Some(extensions);
            }
            _ => problems.push(format!("{name}: no such object for its {keyword} rule")),
        }
    }
    for schema in components.schemas.values_mut() {
        no_nul(schema);
    }
    // Every budget is 1 to MAX_BUDGET (the server's ceiling, an operator's setting, is
    // not the document's to state).
    match components.schemas.get_mut("Budgets") {
        Some(RefOr::T(Schema::Object(budgets))) => {
            for budget in budgets.properties.values_mut() {
                if let RefOr::T(Schema::Object(limit)) = budget {
                    limit.maximum = Some(MAX_BUDGET.into());
                }
            }
        }
        _ => problems.push("Budgets: no such object".to_owned()),
    }
    components
        .schemas
        .insert(JSON_VALUE.to_owned(), RefOr::T(json_value()));
    for item in doc.paths.paths.values_mut() {
        for operation in crate::openapi::operations(item) {
            for parameter in operation.parameters.iter_mut().flatten() {
                if let RefOr::T(parameter) = parameter
                    && let Some(schema) = parameter.schema.as_mut()
                {
                    no_nul(schema);
                }
            }
        }
    }
}

/// Every string without a pattern, an enum or a format gets [`NO_NUL`]; every free-form
/// object takes only [`JSON_VALUE`]s under keys without NUL. (Strings with a pattern
/// have theirs exclude NUL already: the table's patterns are written so.)
fn no_nul(schema: &mut RefOr<Schema>) {
    if let RefOr::T(Schema::Object(object)) = schema
        && object.schema_type == SchemaType::AnyValue
        && object.properties.is_empty()
        && object.enum_values.is_none()
    {
        // Any JSON value (`result_data`): the same, with the NUL rule. A `$ref` with its
        // description beside it (OpenAPI 3.1), not an `allOf` of one: the validator CI
        // runs collects an `allOf`'s properties through `items` without end on a
        // recursive schema.
        let mut any = Ref::from_schema_name(JSON_VALUE);
        any.description = object.description.take().unwrap_or_default();
        *schema = RefOr::Ref(any);
        return;
    }
    let RefOr::T(schema) = schema else { return };
    match schema {
        Schema::Object(object) => {
            if is(&object.schema_type, Type::String)
                && object.pattern.is_none()
                && object.enum_values.is_none()
                && object.format.is_none()
            {
                object.pattern = Some(NO_NUL.to_owned());
            }
            let free_form = matches!(
                object.additional_properties.as_deref(),
                None | Some(AdditionalProperties::FreeForm(true))
            );
            if is(&object.schema_type, Type::Object) && object.properties.is_empty() && free_form {
                any_json(object);
            }
            for property in object.properties.values_mut() {
                no_nul(property);
            }
            if let Some(AdditionalProperties::RefOr(inner)) =
                object.additional_properties.as_deref_mut()
            {
                no_nul(inner);
            }
        }
        Schema::Array(array) => {
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                no_nul(items);
            }
        }
        Schema::OneOf(one) => one.items.iter_mut().for_each(no_nul),
        Schema::AllOf(all) => all.items.iter_mut().for_each(no_nul),
        Schema::AnyOf(any) => any.items.iter_mut().for_each(no_nul),
        _ => {}
    }
}

fn is(schema_type: &SchemaType, wanted: Type) -> bool {
    match schema_type {
        SchemaType::Type(t) => *t == wanted,
        SchemaType::Array(types) => types.contains(&wanted),
        SchemaType::AnyValue => false,
    }
}

/// Makes `object` a map of [`JSON_VALUE`]s under keys without NUL.
fn any_json(object: &mut Object) {
    object.property_names = Some(Box::new(nul_free_string()));
    object.additional_properties = Some(Box::new(AdditionalProperties::RefOr(RefOr::Ref(
        Ref::from_schema_name(JSON_VALUE),
    ))));
}

fn nul_free_string() -> Schema {
    let mut string = Object::with_type(Type::String);
    string.pattern = Some(NO_NUL.to_owned());
    Schema::Object(string)
}

/// Any JSON value without a NUL in a string or a key, at any depth.
fn json_value() -> Schema {
    let mut map = Object::with_type(Type::Object);
    any_json(&mut map);
    let list = Array::new(RefOr::Ref(Ref::from_schema_name(JSON_VALUE)));
    let mut any = AnyOf::new();
    any.items = vec![
        RefOr::T(nul_free_string()),
        RefOr::T(Schema::Object(Object::with_type(Type::Number))),
        RefOr::T(Schema::Object(Object::with_type(Type::Boolean))),
        RefOr::T(Schema::Object(Object::with_type(Type::Null))),
        RefOr::T(Schema::Array(list)),
        RefOr::T(Schema::Object(map)),
    ];
    any.description = Some(
        "Any JSON value; no string and no key may contain U+0000 (NUL), at any depth.".to_owned(),
    );
    Schema::AnyOf(any)
}
