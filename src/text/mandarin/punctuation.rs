//! Chinese punctuation → the marks Kokoro pauses at, as misaki rewrites it: full-width
//! commas, stops and the enumeration comma (、) become `, ` and `. `, book-title and corner
//! brackets become curly quotes, full-width parentheses plain ones. Each mark gets a space
//! after it, so that it breaks the clause as the model learnt.

/// Each Chinese mark and what it becomes, in misaki's order.
const MARKS: &[(&str, &str)] = &[
    ("、", ", "),
    ("，", ", "),
    ("。", ". "),
    ("．", ". "),
    ("！", "! "),
    ("：", ": "),
    ("；", "; "),
    ("？", "? "),
    ("«", " “"),
    ("»", "” "),
    ("《", " “"),
    ("》", "” "),
    ("「", " “"),
    ("」", "” "),
    ("【", " “"),
    ("】", "” "),
    ("（", " ("),
    ("）", ") "),
];

/// `text` with its Chinese marks rewritten, trimmed.
pub(super) fn clause_breaks(text: &str) -> String {
    let mut text = text.to_string();
    for (mark, replacement) in MARKS {
        if text.contains(mark) {
            text = text.replace(mark, replacement);
        }
    }
    text.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::clause_breaks;

    #[test]
    fn chinese_marks_become_the_model_s_marks() {
        assert_eq!(clause_breaks("你好，世界！"), "你好, 世界!");
        assert_eq!(clause_breaks("《红楼梦》是书。"), "“红楼梦” 是书.");
        assert_eq!(clause_breaks("甲、乙（丙）"), "甲, 乙 (丙)");
    }
}
