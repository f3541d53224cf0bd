//! The XML of WebDAV (RFC 4918 §14), read and written with quick-xml.
//!
//! Requests are parsed whole (they are small: [`super::MAX_XML_BODY`]) into
//! a namespace-resolved tree, then read as a `propfind`, `propertyupdate` or
//! `lockinfo`. Anything not well-formed, an undeclared prefix, a prefix
//! bound to the empty namespace, a DTD or nesting deeper than
//! [`MAX_DEPTH`] is refused. Property values a client stores are kept as
//! fragments re-written by [`fragment`], every element declaring its own
//! namespace, so they go back into any answer well-formed.

use std::borrow::Cow;

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::name::ResolveResult;
use quick_xml::{NsReader, Writer};

use volume::webdav::{DeadProperty, PropertyChange};

/// The namespace of WebDAV's own elements and properties.
pub(crate) const DAV: &str = "DAV:";

/// Elements nested deeper than this are refused (a request needs five).
const MAX_DEPTH: usize = 64;
/// More elements and text nodes than this in one body are refused.
const MAX_NODES: usize = 10_000;
/// More attributes (namespace declarations included) on one element are
/// refused: some of quick-xml's name lookups grow with their number.
const MAX_ATTRIBUTES: usize = 32;
/// The longest property value stored, and the longest lock holder.
pub(crate) const MAX_VALUE_BYTES: usize = 16 * 1024;
pub(crate) const MAX_HOLDER_BYTES: usize = 4 * 1024;
/// The namespace the `xml` prefix is bound to, always.
const XML_NAMESPACE: &str = "http://www.w3.org/XML/1998/namespace";

/// Why a request body was refused; the text goes to the client (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the XML body is not acceptable: {0}")]
pub(crate) struct XmlError(String);

fn refuse<T>(why: impl Into<String>) -> Result<T, XmlError> {
    Err(XmlError(why.into()))
}

/// A property's name: its namespace (empty for none) and local name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PropName {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

#[cfg(test)]
impl PropName {
    fn dav(name: &str) -> Self {
        Self {
            namespace: DAV.into(),
            name: name.into(),
        }
    }
}

/// What a `PROPFIND` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Propfind {
    /// Every property with its value (also an empty body).
    AllProp,
    /// Every property's name.
    PropName,
    /// These properties.
    Prop(Vec<PropName>),
}

/// What a `LOCK` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockInfo {
    pub(crate) exclusive: bool,
    /// The client's `DAV:owner` content, as a fragment.
    pub(crate) holder: String,
}

/// A parsed element: its namespace (empty for none), local name,
/// attributes and content.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Element {
    namespace: String,
    name: String,
    /// (namespace, local name, value) of every attribute but namespace
    /// declarations.
    attributes: Vec<(String, String, String)>,
    children: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Element(Element),
    Text(String),
}

impl Element {
    fn is(&self, namespace: &str, name: &str) -> bool {
        self.namespace == namespace && self.name == name
    }

    fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|node| match node {
            Node::Element(element) => Some(element),
            Node::Text(_) => None,
        })
    }

    fn child(&self, name: &str) -> Option<&Element> {
        self.elements().find(|element| element.is(DAV, name))
    }

    fn prop_name(&self) -> PropName {
        PropName {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

fn namespace_of(resolved: ResolveResult<'_>) -> Result<String, XmlError> {
    match resolved {
        ResolveResult::Bound(namespace) => Ok(String::from_utf8_lossy(namespace.0).into_owned()),
        ResolveResult::Unbound => Ok(String::new()),
        ResolveResult::Unknown(prefix) => refuse(format!(
            "the prefix {:?} is not declared",
            String::from_utf8_lossy(&prefix)
        )),
    }
}

/// Parse a whole document into its root element.
fn parse(body: &[u8]) -> Result<Element, XmlError> {
    let text = std::str::from_utf8(body).or_else(|_| refuse("it is not UTF-8"))?;
    let mut reader = NsReader::from_str(text);
    let mut open: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut nodes = 0usize;
    let bad = |error: quick_xml::Error| XmlError(error.to_string());
    loop {
        let (resolved, event) = reader.read_resolved_event().map_err(bad)?;
        nodes += 1;
        if nodes > MAX_NODES {
            drop(resolved);
            return refuse(format!("more than {MAX_NODES} XML nodes"));
        }
        let namespace = if matches!(event, Event::Start(_) | Event::Empty(_)) {
            if open.len() >= MAX_DEPTH {
                return refuse(format!("elements nest deeper than {MAX_DEPTH}"));
            }
            Some(namespace_of(resolved)?)
        } else {
            drop(resolved);
            None
        };
        let text = match event {
            Event::Start(start) => {
                let element = element(&reader, &start, namespace.unwrap_or_default())?;
                open.push(element);
                None
            }
            Event::Empty(start) => {
                let element = element(&reader, &start, namespace.unwrap_or_default())?;
                attach(&mut open, &mut root, element)?;
                None
            }
            Event::End(_) => {
                let Some(done) = open.pop() else {
                    return refuse("an end tag closes nothing");
                };
                attach(&mut open, &mut root, done)?;
                None
            }
            Event::Text(text) => Some(text.decode().map_err(|e| XmlError(e.to_string()))?),
            Event::CData(data) => Some(data.decode().map_err(|e| XmlError(e.to_string()))?),
            Event::GeneralRef(reference) => {
                let character = reference
                    .resolve_char_ref()
                    .map_err(|e| XmlError(e.to_string()))?;
                let name = reference.decode().map_err(|e| XmlError(e.to_string()))?;
                match character.map(String::from) {
                    Some(character) => Some(Cow::Owned(character)),
                    None => match resolve_predefined_entity(&name) {
                        Some(text) => Some(Cow::Borrowed(text)),
                        None => return refuse(format!("the entity &{name}; is not defined")),
                    },
                }
            }
            Event::DocType(_) => return refuse("a document type declaration is not accepted"),
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => None,
            Event::Eof => break,
        };
        if let Some(text) = text {
            check_chars(&text)?;
            match open.last_mut() {
                Some(parent) => match parent.children.last_mut() {
                    Some(Node::Text(before)) => before.push_str(&text),
                    _ => parent.children.push(Node::Text(text.into_owned())),
                },
                None if text.trim().is_empty() => {}
                None => return refuse("text outside the root element"),
            }
        }
    }
    if !open.is_empty() {
        return refuse("an element is not closed");
    }
    root.map_or_else(|| refuse("there is no root element"), Ok)
}

/// An element from its start tag (attributes resolved, declarations checked).
fn element(
    reader: &NsReader<&[u8]>,
    start: &BytesStart<'_>,
    namespace: String,
) -> Result<Element, XmlError> {
    let name = String::from_utf8_lossy(start.local_name().as_ref()).into_owned();
    let mut attributes = Vec::new();
    // Duplicates are checked below, once the count is known to be small
    // (quick-xml's own check compares every pair).
    let mut seen = 0;
    for attribute in start.attributes().with_checks(false) {
        seen += 1;
        if seen > MAX_ATTRIBUTES {
            return refuse(format!(
                "an element has more than {MAX_ATTRIBUTES} attributes"
            ));
        }
        let attribute = attribute.map_err(|e| XmlError(e.to_string()))?;
        let key = attribute.key.as_ref();
        let value = attribute
            .unescape_value()
            .map_err(|e| XmlError(e.to_string()))?;
        if key == b"xmlns" {
            continue;
        }
        if key.starts_with(b"xmlns:") {
            // Namespaces in XML 1.0: a prefix cannot be bound to nothing.
            if value.is_empty() {
                return refuse(format!(
                    "{} declares a prefix for the empty namespace",
                    String::from_utf8_lossy(key)
                ));
            }
            continue;
        }
        check_chars(&value)?;
        let (resolved, local) = reader.resolve_attribute(attribute.key);
        let attribute = (
            namespace_of(resolved)?,
            String::from_utf8_lossy(local.as_ref()).into_owned(),
            value.into_owned(),
        );
        if attributes
            .iter()
            .any(|(namespace, name, _)| (namespace, name) == (&attribute.0, &attribute.1))
        {
            return refuse(format!("the attribute {} appears twice", attribute.1));
        }
        attributes.push(attribute);
    }
    Ok(Element {
        namespace,
        name,
        attributes,
        children: Vec::new(),
    })
}

/// Refuse characters XML 1.0 does not allow (C0 controls but tab, line
/// feed and carriage return), which would make a stored value unreadable.
fn check_chars(text: &str) -> Result<(), XmlError> {
    if text.chars().any(|c| {
        c < ' ' && !matches!(c, '\t' | '\n' | '\r') || matches!(c, '\u{fffe}' | '\u{ffff}')
    }) {
        return refuse("a character XML does not allow");
    }
    Ok(())
}

fn attach(
    open: &mut [Element],
    root: &mut Option<Element>,
    element: Element,
) -> Result<(), XmlError> {
    match open.last_mut() {
        Some(parent) => parent.children.push(Node::Element(element)),
        None if root.is_none() => *root = Some(element),
        None => return refuse("there is more than one root element"),
    }
    Ok(())
}

/// A `PROPFIND` body; empty means `allprop`.
pub(crate) fn parse_propfind(body: &[u8]) -> Result<Propfind, XmlError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Propfind::AllProp);
    }
    let root = parse(body)?;
    if !root.is(DAV, "propfind") {
        return refuse("the root element is not DAV:propfind");
    }
    // Unknown elements are ignored (RFC 4918 §17), so the first that
    // means something decides.
    for child in root.elements().filter(|child| child.namespace == DAV) {
        match child.name.as_str() {
            "allprop" => return Ok(Propfind::AllProp),
            "propname" => return Ok(Propfind::PropName),
            "prop" => {
                return Ok(Propfind::Prop(
                    child.elements().map(Element::prop_name).collect(),
                ));
            }
            _ => {}
        }
    }
    refuse("DAV:propfind holds none of DAV:allprop, DAV:propname or DAV:prop")
}

/// A `PROPPATCH` body: its changes in document order.
pub(crate) fn parse_proppatch(body: &[u8]) -> Result<Vec<PropertyChange>, XmlError> {
    let root = parse(body)?;
    if !root.is(DAV, "propertyupdate") {
        return refuse("the root element is not DAV:propertyupdate");
    }
    let mut changes = Vec::new();
    for step in root.elements() {
        let set = if step.is(DAV, "set") {
            true
        } else if step.is(DAV, "remove") {
            false
        } else {
            continue;
        };
        for prop in step.elements().filter(|prop| prop.is(DAV, "prop")) {
            for property in prop.elements() {
                changes.push(if set {
                    let value = fragment(&property.children);
                    if value.len() > MAX_VALUE_BYTES {
                        return refuse(format!(
                            "a property value is limited to {MAX_VALUE_BYTES} bytes"
                        ));
                    }
                    PropertyChange::Set(DeadProperty {
                        namespace: property.namespace.clone(),
                        name: property.name.clone(),
                        value,
                    })
                } else {
                    PropertyChange::Remove {
                        namespace: property.namespace.clone(),
                        name: property.name.clone(),
                    }
                });
            }
        }
    }
    if changes.is_empty() {
        return refuse("DAV:propertyupdate changes nothing");
    }
    Ok(changes)
}

/// A `LOCK` body (a new lock; a refresh has none).
pub(crate) fn parse_lockinfo(body: &[u8]) -> Result<LockInfo, XmlError> {
    let root = parse(body)?;
    if !root.is(DAV, "lockinfo") {
        return refuse("the root element is not DAV:lockinfo");
    }
    let scope = root
        .child("lockscope")
        .and_then(|scope| scope.elements().find(|e| e.namespace == DAV));
    let exclusive = match scope.map(|scope| scope.name.as_str()) {
        Some("exclusive") => true,
        Some("shared") => false,
        _ => return refuse("DAV:lockscope must hold DAV:exclusive or DAV:shared"),
    };
    let write = root
        .child("locktype")
        .is_some_and(|kind| kind.child("write").is_some());
    if !write {
        return refuse("only DAV:write locks exist");
    }
    let holder = root
        .child("owner")
        .map(|owner| fragment(&owner.children))
        .unwrap_or_default();
    if holder.len() > MAX_HOLDER_BYTES {
        return refuse(format!("DAV:owner is limited to {MAX_HOLDER_BYTES} bytes"));
    }
    Ok(LockInfo { exclusive, holder })
}

/// Nodes written back as an XML fragment: text escaped, every element with
/// its namespace declared on itself (attributes in a namespace get a prefix
/// of their own), so the fragment is well-formed inside any element.
fn fragment(nodes: &[Node]) -> String {
    let mut writer = Writer::new(Vec::new());
    write_nodes(&mut writer, nodes);
    String::from_utf8(writer.into_inner()).unwrap_or_default()
}

fn write_nodes(writer: &mut Writer<Vec<u8>>, nodes: &[Node]) {
    for node in nodes {
        // Writing to a Vec cannot fail.
        let _ = match node {
            Node::Text(text) => writer.write_event(Event::Text(BytesText::new(text))),
            Node::Element(element) => {
                let mut start = BytesStart::new(element.name.as_str());
                start.push_attribute(("xmlns", element.namespace.as_str()));
                for (at, (namespace, name, value)) in element.attributes.iter().enumerate() {
                    if namespace.is_empty() {
                        start.push_attribute((name.as_str(), value.as_str()));
                    } else if namespace == XML_NAMESPACE {
                        // `xml:` is bound already, and may not be declared.
                        start.push_attribute((format!("xml:{name}").as_str(), value.as_str()));
                    } else {
                        start.push_attribute((format!("xmlns:a{at}").as_str(), namespace.as_str()));
                        start.push_attribute((format!("a{at}:{name}").as_str(), value.as_str()));
                    }
                }
                if element.children.is_empty() {
                    writer.write_event(Event::Empty(start))
                } else {
                    let end = BytesEnd::new(element.name.as_str());
                    let _ = writer.write_event(Event::Start(start));
                    write_nodes(writer, &element.children);
                    writer.write_event(Event::End(end))
                }
            }
        };
    }
}

/// An answer document: elements of the DAV namespace (prefix `D:`), and
/// properties in their own namespaces.
pub(crate) struct Document {
    writer: Writer<Vec<u8>>,
}

impl Document {
    /// A document whose root element is `D:{root}`.
    pub(crate) fn new(root: &str) -> Self {
        let mut writer = Writer::new(Vec::new());
        let _ = writer.write_event(Event::Decl(BytesDecl::new("1.0", Some("utf-8"), None)));
        let mut start = BytesStart::new(format!("D:{root}"));
        start.push_attribute(("xmlns:D", DAV));
        let _ = writer.write_event(Event::Start(start));
        Self { writer }
    }

    /// Open `D:{name}`.
    pub(crate) fn open(&mut self, name: &str) -> &mut Self {
        let _ = self
            .writer
            .write_event(Event::Start(BytesStart::new(format!("D:{name}"))));
        self
    }

    /// Close `D:{name}`.
    pub(crate) fn close(&mut self, name: &str) -> &mut Self {
        let _ = self
            .writer
            .write_event(Event::End(BytesEnd::new(format!("D:{name}"))));
        self
    }

    /// `<D:{name}/>`.
    pub(crate) fn empty(&mut self, name: &str) -> &mut Self {
        let _ = self
            .writer
            .write_event(Event::Empty(BytesStart::new(format!("D:{name}"))));
        self
    }

    /// `<D:{name}>text</D:{name}>`.
    pub(crate) fn leaf(&mut self, name: &str, text: &str) -> &mut Self {
        self.open(name);
        let _ = self.writer.write_event(Event::Text(BytesText::new(text)));
        self.close(name)
    }

    /// A property element in its own namespace: empty (`value` `None`), or
    /// holding a fragment this module wrote ([`fragment`]).
    pub(crate) fn property(&mut self, name: &PropName, value: Option<&str>) -> &mut Self {
        let mut start = BytesStart::new(name.name.as_str());
        start.push_attribute(("xmlns", name.namespace.as_str()));
        let _ = match value {
            None => self.writer.write_event(Event::Empty(start)),
            Some(value) => {
                let _ = self.writer.write_event(Event::Start(start));
                // Written by `fragment` from a parsed tree: well-formed.
                self.writer.get_mut().extend_from_slice(value.as_bytes());
                self.writer
                    .write_event(Event::End(BytesEnd::new(name.name.as_str())))
            }
        };
        self
    }

    /// Write a stored fragment ([`fragment`]'s output) as it is.
    pub(crate) fn fragment(&mut self, fragment: &str) -> &mut Self {
        self.writer.get_mut().extend_from_slice(fragment.as_bytes());
        self
    }

    /// How many bytes are written and not yet handed over.
    pub(crate) fn written(&self) -> usize {
        self.writer.get_ref().len()
    }

    /// The bytes written so far, handed over (an answer streamed in parts:
    /// the document goes on from where they end).
    pub(crate) fn take(&mut self) -> Vec<u8> {
        std::mem::take(self.writer.get_mut())
    }

    /// Close the root `D:{root}` and hand the bytes over.
    pub(crate) fn finish(mut self, root: &str) -> Vec<u8> {
        self.close(root);
        self.writer.into_inner()
    }
}

#[cfg(test)]
mod tests;
