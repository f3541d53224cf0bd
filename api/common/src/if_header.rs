//! The `If` header (RFC 4918 §10.4): lists of state tokens and entity tags,
//! optionally tagged with the resource they are about. The header holds if
//! any list holds; a list holds if all its conditions do. The lock tokens a
//! client names in it are the tokens it *submits*: a locked resource may be
//! changed only by a request that submits the lock's token.

use axum::http::HeaderMap;

/// The most lists one `If` header may hold.
const MAX_LISTS: usize = 64;

/// A parsed `If` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfHeader {
    lists: Vec<List>,
}

/// One parenthesised list, about its tagged resource or the request's.
#[derive(Debug, Clone, PartialEq, Eq)]
struct List {
    /// The resource tag (a URL as the client wrote it), if any.
    resource: Option<String>,
    conditions: Vec<Condition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Condition {
    negated: bool,
    test: Test,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Test {
    /// A state token (a lock token, or one no lock has: `DAV:no-lock`).
    Token(String),
    /// An entity tag, with its quotes.
    ETag(String),
}

/// What a condition is checked against: one resource's current state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceState {
    /// The resource's entity tag with its quotes (a file's), if it has one.
    pub etag: Option<String>,
    /// The tokens of the locks that cover it.
    pub lock_tokens: Vec<String>,
}

impl IfHeader {
    /// The request's `If` header, if it has one (several are joined).
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, String> {
        let mut joined = String::new();
        for value in headers.get_all("if") {
            let value = value
                .to_str()
                .map_err(|_| "the If header is not text".to_owned())?;
            joined.push_str(value);
            joined.push(' ');
        }
        if joined.trim().is_empty() {
            return Ok(None);
        }
        Self::parse(&joined).map(Some)
    }

    fn parse(text: &str) -> Result<Self, String> {
        let mut rest = text.trim_start();
        let mut lists = Vec::new();
        let mut resource = None;
        let mut tagged = None;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('<') {
                let (tag, after) = after
                    .split_once('>')
                    .ok_or("a resource tag in If is not closed")?;
                if tagged == Some(false) {
                    return Err("If mixes tagged and untagged lists".into());
                }
                tagged = Some(true);
                resource = Some(tag.to_owned());
                rest = after.trim_start();
                if !rest.starts_with('(') {
                    return Err("a resource tag in If has no list".into());
                }
                continue;
            }
            let Some(after) = rest.strip_prefix('(') else {
                return Err(format!("unexpected text in If: {rest:?}"));
            };
            if tagged.is_none() {
                tagged = Some(false);
            }
            let (body, after) = after.split_once(')').ok_or("a list in If is not closed")?;
            lists.push(List {
                resource: resource.clone(),
                conditions: parse_conditions(body)?,
            });
            rest = after.trim_start();
        }
        if lists.is_empty() {
            return Err("If holds no list".into());
        }
        if lists.len() > MAX_LISTS {
            return Err(format!("If holds more than {MAX_LISTS} lists"));
        }
        Ok(Self { lists })
    }

    /// The resource tags named, to look their state up.
    pub fn tags(&self) -> impl Iterator<Item = &str> {
        self.lists
            .iter()
            .filter_map(|list| list.resource.as_deref())
    }

    /// Whether the header holds, given the state of the request's resource
    /// (`None`) and of each tagged one.
    pub fn holds<'s>(&self, state: impl Fn(Option<&str>) -> &'s ResourceState) -> bool {
        self.lists.iter().any(|list| {
            let state = state(list.resource.as_deref());
            list.conditions.iter().all(|condition| {
                let met = match &condition.test {
                    Test::Token(token) => state.lock_tokens.iter().any(|held| held == token),
                    Test::ETag(tag) => state
                        .etag
                        .as_deref()
                        .is_some_and(|etag| strip_weak(etag) == strip_weak(tag)),
                };
                met != condition.negated
            })
        })
    }

    /// The lock tokens the client submits (named, not negated).
    pub fn submitted_tokens(&self) -> impl Iterator<Item = &str> {
        self.lists
            .iter()
            .flat_map(|list| &list.conditions)
            .filter(|condition| !condition.negated)
            .filter_map(|condition| match &condition.test {
                Test::Token(token) => Some(token.as_str()),
                Test::ETag(_) => None,
            })
    }
}

fn strip_weak(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}

fn parse_conditions(mut body: &str) -> Result<Vec<Condition>, String> {
    let mut conditions = Vec::new();
    loop {
        body = body.trim_start();
        if body.is_empty() {
            break;
        }
        let mut negated = false;
        if let Some(after) = body.strip_prefix("Not") {
            negated = true;
            body = after.trim_start();
        }
        let test = if let Some(after) = body.strip_prefix('<') {
            let (token, after) = after
                .split_once('>')
                .ok_or("a state token in If is not closed")?;
            body = after;
            Test::Token(token.to_owned())
        } else if let Some(after) = body.strip_prefix('[') {
            let (tag, after) = after
                .split_once(']')
                .ok_or("an entity tag in If is not closed")?;
            body = after;
            Test::ETag(tag.trim().to_owned())
        } else {
            return Err(format!("unexpected text in an If list: {body:?}"));
        };
        conditions.push(Condition { negated, test });
    }
    if conditions.is_empty() {
        return Err("an If list is empty".into());
    }
    Ok(conditions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(etag: &str, tokens: &[&str]) -> ResourceState {
        ResourceState {
            etag: Some(etag.into()),
            lock_tokens: tokens.iter().map(|token| (*token).to_owned()).collect(),
        }
    }

    #[test]
    fn litmus_conditional_puts() {
        let locked = state("\"e1\"", &["urn:uuid:t"]);
        let holds = |text: &str| IfHeader::parse(text).expect("parses").holds(|_| &locked);
        assert!(holds("(<urn:uuid:t> [\"e1\"])"));
        assert!(!holds("(<DAV:no-lock> [\"e1\"])"));
        assert!(holds("(<urn:uuid:t>) (Not <DAV:no-lock>)"));
        assert!(holds("(<urn:uuid:tx>) (Not <DAV:no-lock>)"));
        assert!(holds(
            "(<urn:uuid:t> [\"e1\"]) (Not <DAV:no-lock> [\"e1\"])"
        ));
        assert!(!holds(
            "(<urn:uuid:t> [\"e2\"]) (Not <DAV:no-lock> [\"e2\"])"
        ));
        assert!(!holds("(<DAV:no-lock>)"));
        assert!(holds("(Not [\"e2\"])"));
        assert!(
            holds("([W/\"e1\"])"),
            "weak and strong tags compare by value"
        );
    }

    #[test]
    fn tagged_lists_and_submitted_tokens() {
        let header = IfHeader::parse(
            "<http://h/dav/a/> (<urn:uuid:1>) <http://h/dav/b> (Not <urn:uuid:2>) ([\"x\"])",
        )
        .expect("parses");
        assert_eq!(
            header.tags().collect::<Vec<_>>(),
            ["http://h/dav/a/", "http://h/dav/b", "http://h/dav/b"]
        );
        assert_eq!(
            header.submitted_tokens().collect::<Vec<_>>(),
            ["urn:uuid:1"]
        );
        let a = state("\"a\"", &["urn:uuid:1"]);
        let other = ResourceState::default();
        assert!(header.holds(|tag| if tag == Some("http://h/dav/a/") {
            &a
        } else {
            &other
        }));
        // `Not <urn:uuid:2>` holds for a resource without that lock.
        assert!(header.holds(|_| &other));
        let b_locked = state("\"b\"", &["urn:uuid:2"]);
        assert!(!header.holds(|tag| if tag == Some("http://h/dav/b") {
            &b_locked
        } else {
            &other
        }));
    }

    #[test]
    fn malformed_headers_are_refused() {
        for bad in [
            "",
            "(",
            "()",
            "(<a>",
            "<x>",
            "(<a>) <x> (<b>)",
            "([x)",
            "(Nope <a>)",
            "junk",
        ] {
            assert!(IfHeader::parse(bad).is_err(), "{bad}");
        }
    }
}
