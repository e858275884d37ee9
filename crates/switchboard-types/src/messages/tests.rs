use strum::VariantArray;

use super::*;

#[test]
fn enums_spell_the_same_in_json_and_text() {
    fn check<T>(all: &[T])
    where
        T: Serialize + Copy + Into<&'static str> + std::str::FromStr + PartialEq + std::fmt::Debug,
    {
        for v in all {
            let text: &'static str = (*v).into();
            assert_eq!(
                serde_json::to_value(v).ok(),
                Some(Value::String(text.into()))
            );
            assert_eq!(text.parse::<T>().ok(), Some(*v));
        }
    }
    check(MessageType::VARIANTS);
    check(Priority::VARIANTS);
    check(MessageKind::VARIANTS);
    check(ResponseStatus::VARIANTS);
    check(SortOrder::VARIANTS);
    check(crate::routing::Route::VARIANTS);
    check(crate::routing::Via::VARIANTS);
}
