use super::*;

#[test]
fn propfind_bodies() {
    assert_eq!(parse_propfind(b""), Ok(Propfind::AllProp));
    assert_eq!(
        parse_propfind(b"<propfind xmlns=\"DAV:\"><foobar/><allprop/></propfind>"),
        Ok(Propfind::AllProp)
    );
    assert_eq!(
        parse_propfind(
            b"<D:propfind xmlns:D=\"DAV:\"><D:prop><D:getetag/><x:a xmlns:x=\"urn:x\"/><b xmlns=\"\"/></D:prop></D:propfind>"
        ),
        Ok(Propfind::Prop(vec![
            PropName::dav("getetag"),
            PropName {
                namespace: "urn:x".into(),
                name: "a".into()
            },
            PropName {
                namespace: String::new(),
                name: "b".into()
            },
        ]))
    );
    for bad in [
        &b"<foo>"[..],
        b"<D:propfind xmlns:D=\"DAV:\"><D:prop><bar:foo xmlns:bar=\"\"/></D:prop></D:propfind>",
        b"<propfind xmlns=\"DAV:\"><prop><x:y/></prop></propfind>",
        b"<a/><b/>",
        b"<!DOCTYPE x [<!ENTITY a \"b\">]><propfind xmlns=\"DAV:\"/>",
        b"<propfind xmlns=\"DAV:\"><prop>&bogus;</prop></propfind>",
        b"<other xmlns=\"DAV:\"/>",
    ] {
        assert!(
            parse_propfind(bad).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let deep = format!("{}{}", "<a>".repeat(100), "</a>".repeat(100));
    assert!(parse_propfind(deep.as_bytes()).is_err());
    let attributes: String = (0..100).map(|at| format!(" a{at}=\"\"")).collect();
    let many = format!("<propfind xmlns=\"DAV:\"{attributes}><allprop/></propfind>");
    assert!(parse_propfind(many.as_bytes()).is_err());
    let twice = "<propfind xmlns=\"DAV:\" a=\"1\" a=\"2\"><allprop/></propfind>";
    assert!(parse_propfind(twice.as_bytes()).is_err());
    let wide = format!(
        "<propfind xmlns=\"DAV:\"><prop>{}</prop></propfind>",
        "<x/>".repeat(20_000)
    );
    assert!(parse_propfind(wide.as_bytes()).is_err());
    assert!(parse_propfind(b"<propfind xmlns=\"DAV:\"><prop>&#1;</prop></propfind>").is_err());
}

#[test]
fn proppatch_keeps_document_order_and_values_as_fragments() {
    let body = "<?xml version=\"1.0\"?><propertyupdate xmlns='DAV:'>\
        <set><prop><t:a xmlns:t='urn:t'>x &amp; &#65536;</t:a></prop></set>\
        <remove><prop><t:a xmlns:t='urn:t'/></prop></remove>\
        <set><prop><v xmlns='urn:v'><foo xmlns='http://bar' q='1'/></v><n xmlns=''>plain</n></prop></set>\
        </propertyupdate>";
    let changes = parse_proppatch(body.as_bytes()).expect("valid");
    assert_eq!(
        changes,
        vec![
            PropertyChange::Set(DeadProperty {
                namespace: "urn:t".into(),
                name: "a".into(),
                value: "x &amp; \u{10000}".into(),
            }),
            PropertyChange::Remove {
                namespace: "urn:t".into(),
                name: "a".into()
            },
            PropertyChange::Set(DeadProperty {
                namespace: "urn:v".into(),
                name: "v".into(),
                value: "<foo xmlns=\"http://bar\" q=\"1\"/>".into(),
            }),
            PropertyChange::Set(DeadProperty {
                namespace: String::new(),
                name: "n".into(),
                value: "plain".into(),
            }),
        ]
    );
}

#[test]
fn stored_values_stay_well_formed() {
    let body = "<propertyupdate xmlns='DAV:'><set><prop>\
        <v xmlns='urn:v'><t xml:lang='fr'>oui</t></v></prop></set></propertyupdate>";
    let changes = parse_proppatch(body.as_bytes()).expect("valid");
    let PropertyChange::Set(property) = &changes[0] else {
        panic!("a set");
    };
    assert_eq!(property.value, "<t xmlns=\"urn:v\" xml:lang=\"fr\">oui</t>");
    parse(format!("<r>{}</r>", property.value).as_bytes()).expect("well-formed");
    let long = format!(
        "<propertyupdate xmlns='DAV:'><set><prop><v xmlns='urn:v'>{}</v></prop></set></propertyupdate>",
        "x".repeat(MAX_VALUE_BYTES + 1)
    );
    assert!(parse_proppatch(long.as_bytes()).is_err());
}

#[test]
fn lockinfo() {
    let body = b"<?xml version=\"1.0\" encoding=\"utf-8\"?>\
        <lockinfo xmlns='DAV:'><lockscope><shared/></lockscope><locktype><write/></locktype>\
        <owner>litmus test suite</owner></lockinfo>";
    assert_eq!(
        parse_lockinfo(body),
        Ok(LockInfo {
            exclusive: false,
            holder: "litmus test suite".into()
        })
    );
    assert!(
        parse_lockinfo(b"<lockinfo xmlns='DAV:'><locktype><write/></locktype></lockinfo>").is_err()
    );
}

#[test]
fn documents_are_well_formed_with_stored_values() {
    let mut document = Document::new("multistatus");
    document.open("response").leaf("href", "/dav/a&b");
    document.property(
        &PropName {
            namespace: String::new(),
            name: "n".into(),
        },
        Some("<foo xmlns=\"http://bar\"/>"),
    );
    document.close("response");
    let text = String::from_utf8(document.finish("multistatus")).expect("utf-8");
    assert!(text.contains("<D:href>/dav/a&amp;b</D:href>"), "{text}");
    assert!(
        text.contains("<n xmlns=\"\"><foo xmlns=\"http://bar\"/></n>"),
        "{text}"
    );
    parse(text.as_bytes()).expect("well-formed");
}
