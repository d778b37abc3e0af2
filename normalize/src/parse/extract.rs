//! Entity extraction from free-text log messages: who did it, from where, to what.
//!
//! Detectors key their state on entities (a source IP's failure rate, a user's new source host), so
//! the extractor's job is to find them with the right role in the messages security engineers
//! actually read: sshd, PAM, sudo, su, cron, login, dnsmasq/BIND, iptables/ufw, web access logs and
//! `key=value` logs. It is a fixed set of phrase rules over whitespace tokens plus a key table,
//! applied in one left-to-right pass, followed by a scan for any other IP address; no regex engine,
//! because regex sets cost far more per line and cannot express "the word before `from`" cheaply.
//!
//! Ranges are exact byte ranges of `msg` and always fall on ASCII delimiters, so they are valid
//! `str` boundaries. Nothing is canonicalised (case, IPv6 compression, trailing dots): that happens
//! downstream, where the canonical form is defined once. An entity found by several rules is
//! reported once, with the role of the first (most specific) rule that found it; addresses found
//! only by the final scan have [`Role::Other`].

use std::ops::Range;

use watchpost_proto::{
    EntityKind,
    addr::{dotted_quad, is_hostname, is_ipv6},
};

/// What part an entity plays in the event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Where the activity came from: the client address of a login, a packet's source.
    Source,
    /// Where it went: a packet's destination, a listening address, a DNS forwarder.
    Destination,
    /// The acting user: who logged in, who ran sudo or su.
    Subject,
    /// The user acted upon: sudo's `USER=root`, su's target account.
    Target,
    /// Mentioned, with no role the text makes clear (a bare address, a queried domain).
    Other,
}

/// One entity found in a message; `range` indexes into the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextEntity {
    /// What the entity is.
    pub kind: EntityKind,
    /// What it did in the event.
    pub role: Role,
    /// Its exact text in the message, uncanonicalised.
    pub range: Range<usize>,
}

/// Appends the entities found in `msg` to `out`, stopping when `out` is full: the vector is never
/// grown, so sizing its capacity is how the caller bounds both memory and the number of entities
/// per line. Entries already in `out` are left alone (and not considered for de-duplication).
pub fn extract_entities(msg: &str, out: &mut Vec<TextEntity>) {
    let mut x = Extractor {
        b: msg.as_bytes(),
        first: out.len(),
        out,
        actor: None,
        no_quote_after: [usize::MAX; 2],
    };
    if x.full() {
        return;
    }
    x.leading_forms();
    x.token_rules();
    x.scan_addresses();
}

struct Extractor<'m, 'o> {
    b: &'m [u8],
    out: &'o mut Vec<TextEntity>,
    /// Index in `out` of this call's first entity.
    first: usize,
    /// The acting user named by `ruser=`/`logname=`, to tell PAM's `user=` Subject from Target.
    actor: Option<Range<usize>>,
    /// Positions after which no `"` (index 0) or `'` (index 1) occurs: keeps unterminated quotes in
    /// a long line from being searched for again and again.
    no_quote_after: [usize; 2],
}

impl<'m> Extractor<'m, '_> {
    fn full(&self) -> bool {
        self.out.len() >= self.out.capacity()
    }

    fn push(&mut self, kind: EntityKind, role: Role, range: Range<usize>) {
        if self.full() || range.is_empty() {
            return;
        }
        if self.out[self.first..]
            .iter()
            .any(|e| e.kind == kind && e.range == range)
        {
            return;
        }
        self.out.push(TextEntity { kind, role, range });
    }

    fn text(&self, r: &Range<usize>) -> &'m [u8] {
        &self.b[r.clone()]
    }

    fn is(&self, r: &Option<Range<usize>>, word: &[u8]) -> bool {
        r.as_ref().is_some_and(|r| &self.b[r.clone()] == word)
    }

    /// The next token after `r`.
    fn after(&self, r: &Option<Range<usize>>) -> Option<Range<usize>> {
        r.as_ref().and_then(|r| token_at(self.b, r.end))
    }

    fn push_user(&mut self, r: Option<Range<usize>>, role: Role) -> Option<Range<usize>> {
        let u = r.and_then(|r| clean_user(self.b, r))?;
        self.push(EntityKind::User, role, u.clone());
        Some(u)
    }

    /// An IP address at the start of the token `r` (optionally in brackets), as Ip; or with
    /// `hosts`, a hostname as Host; or `host[ip]` (Postfix) as both.
    fn push_addr(&mut self, r: Option<Range<usize>>, role: Role, hosts: bool) -> bool {
        let Some(r) = r else { return false };
        if let Some(ip) = ip_in(self.b, r.clone()) {
            self.push(EntityKind::Ip, role, ip);
            return true;
        }
        let t = self.text(&r);
        if let Some(open) = memchr::memchr(b'[', t)
            && open > 0
            && let Some(ip) = ip_in(self.b, r.start + open..r.end)
        {
            let host = r.start..r.start + open;
            if hosts
                && is_hostname(self.text(&host))
                && !self.text(&host).eq_ignore_ascii_case(b"unknown")
            {
                self.push(EntityKind::Host, role, host);
            }
            self.push(EntityKind::Ip, role, ip);
            return true;
        }
        if hosts {
            let h = trim_punct(self.b, r);
            if is_hostname(self.text(&h)) {
                self.push(EntityKind::Host, role, h);
                return true;
            }
        }
        false
    }

    /// Forms recognised by the message's first tokens: sudo, cron and web access logs.
    fn leading_forms(&mut self) {
        let t0 = token_at(self.b, 0);
        let t1 = self.after(&t0);
        let t2 = self.after(&t1);
        let t3 = self.after(&t2);
        // sudo: `alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; COMMAND=/bin/ls`
        if self.is(&t1, b":") {
            let finder = |needle: &[u8]| memchr::memmem::find(self.b, needle).is_some();
            if finder(b"TTY=") || finder(b"COMMAND=") || finder(b"USER=") {
                self.push_user(t0.clone(), Role::Subject);
            }
        }
        // cron: `(root) CMD (run-parts /etc/cron.hourly)`
        if let (Some(r0), Some(r1)) = (&t0, &t1) {
            let w0 = self.text(r0);
            let w1 = self.text(r1);
            if w0.len() > 2
                && w0[0] == b'('
                && w0[w0.len() - 1] == b')'
                && w1.len() >= 3
                && w1.iter().all(|c| c.is_ascii_uppercase())
            {
                self.push_user(Some(r0.start + 1..r0.end - 1), Role::Subject);
            }
        }
        // Common/combined log format: `1.2.3.4 - alice [10/Oct/2000:13:55:36 -0700] "GET / ..."`
        if let Some(r3) = &t3 {
            let w3 = self.text(r3);
            if w3.first() == Some(&b'[') && w3.contains(&b'/') && w3.contains(&b':') {
                let client_ok = t0.as_ref().is_some_and(|r| {
                    ip_in(self.b, r.clone()).is_some_and(|ip| ip == *r) || is_hostname(self.text(r))
                });
                if client_ok {
                    self.push_addr(t0, Role::Source, true);
                    self.push_user(t2, Role::Subject);
                }
            }
        }
    }

    /// The phrase and `key=value` rules, in one pass over the tokens.
    fn token_rules(&mut self) {
        let mut prev1: Option<Range<usize>> = None;
        let mut prev2: Option<Range<usize>> = None;
        let mut pos = 0;
        while let Some(t) = token_at(self.b, pos) {
            if self.full() {
                return;
            }
            pos = t.end;
            let cur = Some(t.clone());
            let w = self.text(&t);
            if let Some(eq) = memchr::memchr(b'=', w) {
                pos = pos.max(self.key_value(t.start, t.start + eq, t.end));
            } else {
                self.phrase(&cur, &prev1, &prev2);
            }
            prev2 = prev1;
            prev1 = cur;
        }
    }

    /// Rules keyed on the word `cur`, looking back at most two tokens and ahead at most four.
    fn phrase(
        &mut self,
        cur: &Option<Range<usize>>,
        prev1: &Option<Range<usize>>,
        prev2: &Option<Range<usize>>,
    ) {
        let Some(t) = cur.clone() else { return };
        let t1 = self.after(cur);
        match self.text(&t) {
            b"from" | b"by" | b"FROM" => {
                let upper = self.text(&t) == b"FROM";
                // `Disconnected from authenticating user root 1.2.3.4 port 22`
                if self.user_then_ip(&t1) {
                    return;
                }
                if self.push_addr(t1.clone(), Role::Source, upper) {
                    // `Failed password for [invalid user] alice from 1.2.3.4`,
                    // `User root from 1.2.3.4 not allowed`
                    let lead = prev2.as_ref().map(|r| self.text(r));
                    if lead.is_some_and(|w| w == b"for" || w.eq_ignore_ascii_case(b"user")) {
                        self.push_user(prev1.clone(), Role::Subject);
                    }
                    // ftpd/klogind: `connection from 1.2.3.4 (host.example.net) at ...`, where the
                    // parenthesised word is the reverse lookup of the address just before it.
                    let t2 = self.after(&t1);
                    let bare_ip = t1
                        .as_ref()
                        .is_some_and(|r| ip_in(self.b, r.clone()).is_some_and(|ip| ip == *r));
                    if let Some(r2) = t2.filter(|_| bare_ip) {
                        let w2 = self.text(&r2);
                        let close = memchr::memchr(b')', w2).unwrap_or(0);
                        let inner = r2.start + 1..r2.start + close;
                        if w2[0] == b'(' && close > 1 && self.text(&inner).contains(&b'.') {
                            self.push_addr(Some(inner), Role::Source, true);
                        }
                    }
                }
            }
            b"for" => {
                let t2 = self.after(&t1);
                let t3 = self.after(&t2);
                if self.is(&t1, b"user") && (self.is(prev1, b"opened") || self.is(prev1, b"closed"))
                {
                    // `session opened for user root by alice(uid=1000)`: alice acts on root.
                    // `session opened for user root by (uid=0)`: root is the one logging in.
                    let by = if self.is(&t3, b"by") {
                        self.after(&t3)
                    } else {
                        None
                    };
                    let actor = by.filter(|r| self.b[r.start] != b'(');
                    if let Some(a) = actor.and_then(|r| clean_user(self.b, r)) {
                        self.push(EntityKind::User, Role::Subject, a);
                        self.push_user(t2, Role::Target);
                    } else {
                        self.push_user(t2, Role::Subject);
                    }
                } else if self.is(prev1, b"su") {
                    // `FAILED su for root by alice`
                    if self.is(&t2, b"by") {
                        self.push_user(t3, Role::Subject);
                    }
                    self.push_user(t1, Role::Target);
                } else if self.is(&t1, b"user") {
                    if !self.is(&t2, b"from") {
                        self.push_user(t2, Role::Subject);
                    }
                } else if let (Some(r1), Some(r2)) = (&t1, &t2) {
                    // `reverse mapping checking getaddrinfo for host.example [1.2.3.4] failed`
                    if self.b[r2.start] == b'['
                        && is_hostname(self.text(r1))
                        && self.push_addr(t2.clone(), Role::Source, false)
                    {
                        self.push(EntityKind::Host, Role::Source, r1.clone());
                    }
                }
            }
            b"user" | b"User" => {
                let lead = prev1.as_ref().map(|r| self.text(r));
                let qualified = lead.is_some_and(|w| {
                    w.eq_ignore_ascii_case(b"invalid")
                        || w.eq_ignore_ascii_case(b"illegal")
                        || w == b"authenticating"
                });
                if qualified && !self.is(&t1, b"from") {
                    self.push_user(t1, Role::Subject);
                }
            }
            b"(to" => {
                // su: `(to root) alice on pts/1`
                let t2 = self.after(&t1);
                let t3 = self.after(&t2);
                if t1.as_ref().is_some_and(|r| self.text(r).ends_with(b")")) && self.is(&t3, b"on")
                {
                    self.push_user(t1, Role::Target);
                    self.push_user(t2, Role::Subject);
                }
            }
            b"to" => self.push_ip(t1, Role::Destination),
            // sshd: `Connection from A port 1 on B port 22`, `Server listening on B port 22`
            b"on" if self.is(&self.after(&t1), b"port") => self.push_ip(t1, Role::Destination),
            b"Address" => {
                // sshd: `Address 1.2.3.4 maps to host.example, but this does not map back ...`
                let found = self.push_addr(t1.clone(), Role::Source, false);
                let t2 = self.after(&t1);
                let t3 = self.after(&t2);
                if found && self.is(&t2, b"maps") && self.is(&t3, b"to") {
                    self.push_addr(self.after(&t3), Role::Source, true);
                }
            }
            b"client" => {
                // BIND: `client @0x7f.. 10.0.0.1#53211 (example.com): query: ...`
                let t = if t1.as_ref().is_some_and(|r| self.b[r.start] == b'@') {
                    self.after(&t1)
                } else {
                    t1
                };
                self.push_addr(t, Role::Source, false);
            }
            b"query:" | b"forwarded" => self.push_domain(t1),
            b"reply" | b"cached" | b"config" if self.is(&self.after(&t1), b"is") => {
                self.push_domain(t1)
            }
            b"FOR" | b"BY" => {
                // login: `FAILED LOGIN 1 FROM host FOR alice, Authentication failure`,
                // `LOGIN ON tty1 BY alice`
                self.push_user(t1, Role::Subject);
            }
            w if w.starts_with(b"query[") && w.ends_with(b"]") => self.push_domain(t1),
            _ => {}
        }
    }

    /// `[authenticating|invalid|illegal] user NAME ADDR` after `from`/`by` (sshd 7+).
    fn user_then_ip(&mut self, t1: &Option<Range<usize>>) -> bool {
        let mut t = t1.clone();
        if self.is(&t, b"authenticating") || self.is(&t, b"invalid") || self.is(&t, b"illegal") {
            t = self.after(&t);
        }
        if !self.is(&t, b"user") {
            return false;
        }
        let name = self.after(&t);
        let addr = self.after(&name);
        if addr
            .as_ref()
            .and_then(|r| ip_in(self.b, r.clone()))
            .is_none()
        {
            return false;
        }
        self.push_user(name, Role::Subject);
        self.push_addr(addr, Role::Source, false);
        true
    }

    /// An IP address at the start of token `r` (never a hostname).
    fn push_ip(&mut self, r: Option<Range<usize>>, role: Role) {
        if let Some(ip) = r.and_then(|r| ip_in(self.b, r)) {
            self.push(EntityKind::Ip, role, ip);
        }
    }

    fn push_domain(&mut self, r: Option<Range<usize>>) {
        if let Some(r) = r {
            let r = trim_punct(self.b, r);
            if is_hostname(self.text(&r)) && ip_in(self.b, r.clone()) != Some(r.clone()) {
                self.push(EntityKind::Domain, Role::Other, r);
            }
        }
    }

    /// Handles `key=value` where the token starts at `start`, '=' is at `eq` and the token ends at
    /// `end`. Returns where scanning should resume (after a quoted value that spans tokens).
    fn key_value(&mut self, start: usize, eq: usize, end: usize) -> usize {
        let Some(class) = classify_key(&self.b[start..eq]) else {
            return end;
        };
        let vs = eq + 1;
        let (value, resume) = match self.b.get(vs) {
            Some(&q @ (b'"' | b'\'')) => match self.closing_quote(q, vs + 1) {
                Some(close) => (vs + 1..close, close + 1),
                // Unterminated: the line was cut, and a cut value may be a different name.
                None => (vs + 1..vs + 1, end),
            },
            _ => {
                // Unquoted values end at the token's end or a list separator.
                let v = &self.b[vs..end];
                let stop = v
                    .iter()
                    .position(|&c| matches!(c, b',' | b';' | b'"' | b'\''))
                    .unwrap_or(v.len());
                (vs..vs + stop, end)
            }
        };
        match class {
            KeyClass::User(role) => {
                self.push_user(Some(value), role);
            }
            KeyClass::Actor => {
                if let Some(u) = self.push_user(Some(value), Role::Subject) {
                    self.actor = Some(u);
                }
            }
            KeyClass::PamUser => {
                // su's PAM line names both sides: `logname=alice ... ruser=alice ... user=root`.
                let role = match (&self.actor, clean_user(self.b, value.clone())) {
                    (Some(a), Some(u)) if self.b[a.clone()] != self.b[u.clone()] => Role::Target,
                    _ => Role::Subject,
                };
                self.push_user(Some(value), role);
            }
            KeyClass::Addr(role) => {
                if !value.is_empty() {
                    self.push_addr(Some(value), role, true);
                }
            }
            KeyClass::Domain => self.push_domain(Some(value)),
        }
        resume
    }

    fn closing_quote(&mut self, q: u8, from: usize) -> Option<usize> {
        let slot = usize::from(q == b'\'');
        if from >= self.no_quote_after[slot] {
            return None;
        }
        match memchr::memchr(q, self.b.get(from..)?) {
            Some(i) => Some(from + i),
            None => {
                self.no_quote_after[slot] = from;
                None
            }
        }
    }

    /// Reports every IP address that no rule claimed, as [`Role::Other`].
    fn scan_addresses(&mut self) {
        let b = self.b;
        let mut i = 0;
        while i < b.len() && !self.full() {
            let Some(off) = memchr::memchr2(b'.', b':', &b[i..]) else {
                return;
            };
            let trigger = i + off;
            let mut s = trigger;
            while s > i && b[s - 1].is_ascii_hexdigit() {
                s -= 1;
            }
            let boundary = s == 0 || (!is_word_byte(b[s - 1]) && !matches!(b[s - 1], b'.' | b':'));
            if boundary && let Some(end) = ip_at(b, s) {
                self.push(EntityKind::Ip, Role::Other, s..end);
                i = end;
            } else {
                i = trigger + 1;
            }
        }
    }
}

#[derive(Clone, Copy)]
enum KeyClass {
    /// A user with a fixed role.
    User(Role),
    /// A user who is the actor (`ruser=`, `logname=`); also remembered for `PamUser`.
    Actor,
    /// PAM's `user=`: the Subject, unless an actor with another name was given (then Target).
    PamUser,
    /// An IP address, or a hostname.
    Addr(Role),
    Domain,
}

fn classify_key(k: &[u8]) -> Option<KeyClass> {
    Some(match k {
        b"user" | b"User" | b"username" | b"userName" | b"user_name" => KeyClass::PamUser,
        b"ruser" | b"logname" | b"acct" | b"suser" | b"src_user" | b"srcuser" => KeyClass::Actor,
        // Upper-case USER= is sudo's run-as user.
        b"USER" | b"duser" | b"dst_user" | b"dstuser" | b"target_user" => {
            KeyClass::User(Role::Target)
        }
        b"src" | b"SRC" | b"srcip" | b"src_ip" | b"saddr" | b"client" | b"client_ip"
        | b"clientip" | b"rhost" | b"remote_addr" | b"remote_ip" | b"addr" | b"shost"
        | b"source_ip" => KeyClass::Addr(Role::Source),
        b"dst" | b"DST" | b"dstip" | b"dst_ip" | b"daddr" | b"dest_ip" | b"dhost"
        | b"destination_ip" => KeyClass::Addr(Role::Destination),
        b"host" | b"hostname" | b"HOST" => KeyClass::Addr(Role::Other),
        b"domain" | b"qname" | b"query" => KeyClass::Domain,
        _ => return None,
    })
}

#[inline]
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Bytes that continue a word, so that an address touching them is part of something else
/// (`host1.2.3.4.example`, `v1.2.3.4`, `dsl-1.2.3.4`).
#[inline]
fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// The whitespace-delimited token at or after `p`.
fn token_at(b: &[u8], mut p: usize) -> Option<Range<usize>> {
    while p < b.len() && is_space(b[p]) {
        p += 1;
    }
    if p >= b.len() {
        return None;
    }
    let s = p;
    while p < b.len() && !is_space(b[p]) {
        p += 1;
    }
    Some(s..p)
}

/// Drops sentence punctuation and wrapping from the end of a token: `host.example.com,` → `...com`.
fn trim_punct(b: &[u8], r: Range<usize>) -> Range<usize> {
    let (mut s, mut e) = (r.start, r.end);
    while s < e && matches!(b[s], b'(' | b'[' | b'<' | b'"' | b'\'') {
        s += 1;
    }
    while e > s
        && matches!(
            b[e - 1],
            b'.' | b',' | b';' | b':' | b')' | b']' | b'>' | b'"' | b'\''
        )
    {
        e -= 1;
    }
    s..e
}

/// A user name in token `r`, without wrapping, trailing punctuation or a `(uid=N)` suffix; `None`
/// for placeholders such as `-` and `(unknown)`.
fn clean_user(b: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    let raw = &b[r.clone()];
    if raw.eq_ignore_ascii_case(b"(unknown)")
        || raw.eq_ignore_ascii_case(b"(none)")
        || raw == b"(null)"
    {
        return None;
    }
    let mut r = trim_punct(b, r);
    if let Some(paren) = memchr::memchr(b'(', &b[r.clone()]) {
        r.end = r.start + paren;
    }
    let u = &b[r.clone()];
    let placeholder = u.is_empty()
        || u == b"-"
        || u == b"?"
        || u.eq_ignore_ascii_case(b"unknown")
        || u.eq_ignore_ascii_case(b"(unknown)");
    let bad_byte = u.iter().any(|&c| {
        c.is_ascii_control()
            || matches!(
                c,
                b' ' | b'='
                    | b'"'
                    | b'\''
                    | b'('
                    | b')'
                    | b'['
                    | b']'
                    | b'{'
                    | b'}'
                    | b'<'
                    | b'>'
                    | b','
                    | b';'
                    | b'|'
                    | b'`'
                    | b'*'
            )
    });
    (!placeholder && !bad_byte && u.len() <= 256).then_some(r)
}

/// An IP address at the start of `r` (or just inside a leading '['), not running on into a word.
fn ip_in(b: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    let s = if b.get(r.start) == Some(&b'[') {
        r.start + 1
    } else {
        r.start
    };
    let end = ip_at(&b[..r.end], s)?;
    Some(s..end)
}

/// Parses an IPv4 or IPv6 address starting exactly at `s` and returns its end. What follows may be
/// a port (`:22`, `#53`, `/24`), a zone (`%eth0`), punctuation or the end; never a word character.
fn ip_at(b: &[u8], s: usize) -> Option<usize> {
    if let Some(end) = ipv4_at(b, s) {
        return Some(end);
    }
    ipv6_at(b, s)
}

fn ends_cleanly(b: &[u8], end: usize) -> bool {
    match b.get(end) {
        None => true,
        Some(&c) if is_word_byte(c) => false,
        // A '.' followed by a word is a longer dotted name, not the end of a sentence.
        Some(b'.') => !b.get(end + 1).copied().is_some_and(is_word_byte),
        Some(_) => true,
    }
}

fn ipv4_at(b: &[u8], s: usize) -> Option<usize> {
    let end = dotted_quad(b.get(s..)?)?.1 + s;
    ends_cleanly(b, end).then_some(end)
}

fn ipv6_at(b: &[u8], s: usize) -> Option<usize> {
    let mut e = s;
    while e < b.len() && (b[e].is_ascii_hexdigit() || b[e] == b':' || b[e] == b'.') {
        e += 1;
    }
    if e > s && is_ipv6(&b[s..e]) && ends_cleanly(b, e) {
        return Some(e);
    }
    // A trailing ':' or '.' belongs to the sentence: `from ::1: bye`, `at fe80::1.`
    if e > s + 1 && matches!(b[e - 1], b':' | b'.') && is_ipv6(&b[s..e - 1]) && ends_cleanly(b, e) {
        return Some(e - 1);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use EntityKind::{Domain, Host, Ip, User};
    use Role::{Destination, Other, Source, Subject, Target};

    /// Entities of `msg` as (kind, role, text), in the order found.
    fn ents(msg: &str) -> Vec<(EntityKind, Role, &str)> {
        let mut out = Vec::with_capacity(64);
        extract_entities(msg, &mut out);
        check_sound(msg, &out, 0);
        out.iter()
            .map(|e| (e.kind, e.role, &msg[e.range.clone()]))
            .collect()
    }

    /// Same as [`ents`] but order-insensitive.
    fn ents_sorted(msg: &str) -> Vec<(EntityKind, Role, &str)> {
        let mut v = ents(msg);
        v.sort_by_key(|(k, r, t)| (format!("{k:?}{r:?}"), t.to_string()));
        v
    }

    fn sorted(
        mut v: Vec<(EntityKind, Role, &'static str)>,
    ) -> Vec<(EntityKind, Role, &'static str)> {
        v.sort_by_key(|(k, r, t)| (format!("{k:?}{r:?}"), t.to_string()));
        v
    }

    fn check_sound(msg: &str, out: &[TextEntity], first: usize) {
        for (i, e) in out.iter().enumerate().skip(first) {
            assert!(
                e.range.start < e.range.end && e.range.end <= msg.len(),
                "{e:?} in {msg:?}"
            );
            assert!(msg.is_char_boundary(e.range.start) && msg.is_char_boundary(e.range.end));
            assert!(
                !out[first..i]
                    .iter()
                    .any(|o| o.kind == e.kind && o.range == e.range),
                "duplicate {e:?} in {msg:?}"
            );
        }
    }

    #[track_caller]
    fn expect(msg: &str, want: Vec<(EntityKind, Role, &'static str)>) {
        assert_eq!(ents_sorted(msg), sorted(want), "{msg}");
    }

    #[test]
    fn sshd() {
        expect(
            "Accepted password for alice from 10.0.0.5 port 22 ssh2",
            vec![(User, Subject, "alice"), (Ip, Source, "10.0.0.5")],
        );
        expect(
            "Accepted publickey for alice from 10.0.0.5 port 50022 ssh2: RSA SHA256:AbCdEf0123",
            vec![(User, Subject, "alice"), (Ip, Source, "10.0.0.5")],
        );
        expect(
            "Failed password for invalid user admin from 1.2.3.4 port 4242 ssh2",
            vec![(User, Subject, "admin"), (Ip, Source, "1.2.3.4")],
        );
        expect(
            "Failed none for invalid user 0 from 1.2.3.4 port 4242 ssh2",
            vec![(User, Subject, "0"), (Ip, Source, "1.2.3.4")],
        );
        expect(
            "Failed password for invalid user  from 1.2.3.4 port 4242 ssh2",
            vec![(Ip, Source, "1.2.3.4")],
        );
        expect(
            "Invalid user bob from 1.2.3.4",
            vec![(User, Subject, "bob"), (Ip, Source, "1.2.3.4")],
        );
        expect(
            "Invalid user bob from 2001:db8::7 port 5555",
            vec![(User, Subject, "bob"), (Ip, Source, "2001:db8::7")],
        );
        expect(
            "input_userauth_request: invalid user oracle [preauth]",
            vec![(User, Subject, "oracle")],
        );
        expect(
            "Connection closed by authenticating user root 1.2.3.4 port 22 [preauth]",
            vec![(User, Subject, "root"), (Ip, Source, "1.2.3.4")],
        );
        expect(
            "Connection closed by 1.2.3.4 port 22 [preauth]",
            vec![(Ip, Source, "1.2.3.4")],
        );
        expect(
            "Disconnected from user alice 1.2.3.4 port 22",
            vec![(User, Subject, "alice"), (Ip, Source, "1.2.3.4")],
        );
        expect(
            "Disconnected from invalid user x 1.2.3.4 port 22 [preauth]",
            vec![(User, Subject, "x"), (Ip, Source, "1.2.3.4")],
        );
        expect(
            "Received disconnect from 139.59.209.18: 11: Bye Bye [preauth]",
            vec![(Ip, Source, "139.59.209.18")],
        );
        expect(
            "Received disconnect from 139.59.209.18 port 4242:11: Bye Bye [preauth]",
            vec![(Ip, Source, "139.59.209.18")],
        );
        expect(
            "reverse mapping checking getaddrinfo for ns.marryaldkfaczcz.com [173.234.31.186] failed - POSSIBLE BREAK-IN ATTEMPT!",
            vec![
                (Host, Source, "ns.marryaldkfaczcz.com"),
                (Ip, Source, "173.234.31.186"),
            ],
        );
        expect(
            "Address 1.2.3.4 maps to host.example.com, but this does not map back to the address - POSSIBLE BREAK-IN ATTEMPT!",
            vec![(Ip, Source, "1.2.3.4"), (Host, Source, "host.example.com")],
        );
        expect(
            "Connection from 1.2.3.4 port 5555 on 10.0.0.1 port 22 rdomain \"\"",
            vec![(Ip, Source, "1.2.3.4"), (Ip, Destination, "10.0.0.1")],
        );
        expect(
            "Server listening on 0.0.0.0 port 22.",
            vec![(Ip, Destination, "0.0.0.0")],
        );
        expect(
            "Did not receive identification string from 5.6.7.8",
            vec![(Ip, Source, "5.6.7.8")],
        );
        expect(
            "User root from 1.2.3.4 not allowed because not listed in AllowUsers",
            vec![(User, Subject, "root"), (Ip, Source, "1.2.3.4")],
        );
        expect(
            "error: maximum authentication attempts exceeded for root from 1.2.3.4 port 22 ssh2 [preauth]",
            vec![(User, Subject, "root"), (Ip, Source, "1.2.3.4")],
        );
        expect(
            "message repeated 2 times: [ Failed password for root from 1.2.3.4 port 22 ssh2]",
            vec![(User, Subject, "root"), (Ip, Source, "1.2.3.4")],
        );
        expect(
            "Accepted password for josé from 10.0.0.5 port 22 ssh2",
            vec![(User, Subject, "josé"), (Ip, Source, "10.0.0.5")],
        );
    }

    #[test]
    fn pam() {
        expect(
            "pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=218.188.2.4  user=root",
            vec![(Ip, Source, "218.188.2.4"), (User, Subject, "root")],
        );
        expect(
            "authentication failure; logname= uid=0 euid=0 tty=NODEVssh ruser= rhost=220-135-151-1.hinet-ip.hinet.net  user=root",
            vec![
                (Host, Source, "220-135-151-1.hinet-ip.hinet.net"),
                (User, Subject, "root"),
            ],
        );
        expect("pam_unix(sshd:auth): check pass; user unknown", vec![]);
        expect(
            "pam_unix(sshd:session): session opened for user root by (uid=0)",
            vec![(User, Subject, "root")],
        );
        expect(
            "session closed for user news",
            vec![(User, Subject, "news")],
        );
        expect(
            "pam_unix(sshd:session): session opened for user alice(uid=1000) by (uid=0)",
            vec![(User, Subject, "alice")],
        );
        expect(
            "pam_unix(sudo:session): session opened for user root(uid=0) by alice(uid=1000)",
            vec![(User, Target, "root"), (User, Subject, "alice")],
        );
        expect(
            "pam_unix(su:auth): authentication failure; logname=alice uid=1000 euid=0 tty=pts/1 ruser=alice rhost=  user=root",
            vec![
                (User, Subject, "alice"),
                (User, Subject, "alice"),
                (User, Target, "root"),
            ],
        );
        expect(
            "pam_unix(sudo:auth): authentication failure; logname=bob uid=1000 euid=0 tty=/dev/pts/0 ruser=bob rhost=  user=bob",
            vec![
                (User, Subject, "bob"),
                (User, Subject, "bob"),
                (User, Subject, "bob"),
            ],
        );
        expect(
            "PAM 2 more authentication failures; logname= uid=0 euid=0 tty=ssh ruser= rhost=1.2.3.4  user=root",
            vec![(Ip, Source, "1.2.3.4"), (User, Subject, "root")],
        );
    }

    #[test]
    fn sudo_su_cron_login() {
        expect(
            "alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; COMMAND=/bin/cat /etc/shadow",
            vec![(User, Subject, "alice"), (User, Target, "root")],
        );
        expect(
            "   bob : 3 incorrect password attempts ; TTY=pts/1 ; PWD=/tmp ; USER=root ; COMMAND=/usr/bin/id",
            vec![(User, Subject, "bob"), (User, Target, "root")],
        );
        expect(
            "(to root) alice on pts/1",
            vec![(User, Target, "root"), (User, Subject, "alice")],
        );
        expect(
            "FAILED su for root by alice",
            vec![(User, Target, "root"), (User, Subject, "alice")],
        );
        expect(
            "Successful su for postgres by root",
            vec![(User, Target, "postgres"), (User, Subject, "root")],
        );
        expect(
            "(root) CMD (run-parts /etc/cron.hourly)",
            vec![(User, Subject, "root")],
        );
        expect("(*system*) RELOAD (/etc/crontab)", vec![]);
        expect(
            "FAILED LOGIN 1 FROM gw.example.net FOR alice, Authentication failure",
            vec![(Host, Source, "gw.example.net"), (User, Subject, "alice")],
        );
        expect("LOGIN ON tty1 BY alice", vec![(User, Subject, "alice")]);
        expect(
            "ANONYMOUS FTP LOGIN FROM 1.2.3.4, (anonymous)",
            vec![(Ip, Source, "1.2.3.4")],
        );
        expect(
            "connection from 82.68.222.194 (82-68-222-194.dsl.in-addr.zen.co.uk) at Sun Jul 10 03:55:15 2005",
            vec![
                (Ip, Source, "82.68.222.194"),
                (Host, Source, "82-68-222-194.dsl.in-addr.zen.co.uk"),
            ],
        );
        expect(
            "connection from 1.2.3.4 () at Sun Jul 10 03:55:15 2005",
            vec![(Ip, Source, "1.2.3.4")],
        );
        expect(
            "Authentication failed from 163.27.187.39 (163.27.187.39): Permission denied in replay cache code",
            vec![(Ip, Source, "163.27.187.39"), (Ip, Source, "163.27.187.39")],
        );
    }

    #[test]
    fn key_value_styles() {
        expect(
            "[UFW BLOCK] IN=eth0 OUT= MAC=00:16:3e:aa:bb:cc:00:16:3e:dd:ee:ff:08:00 SRC=1.2.3.4 DST=10.0.0.1 LEN=60 TOS=0x00 PROTO=TCP SPT=4242 DPT=22",
            vec![(Ip, Source, "1.2.3.4"), (Ip, Destination, "10.0.0.1")],
        );
        expect(
            "[12345.678] IN=eth0 OUT= SRC=2001:db8::1 DST=fe80::1%eth0 LEN=80",
            vec![(Ip, Source, "2001:db8::1"), (Ip, Destination, "fe80::1")],
        );
        expect(
            "action=deny src=10.0.0.1 dst=10.0.0.2 srcip=10.0.0.3 dstip=10.0.0.4 src_ip=10.0.0.5 dst_ip=10.0.0.6",
            vec![
                (Ip, Source, "10.0.0.1"),
                (Ip, Destination, "10.0.0.2"),
                (Ip, Source, "10.0.0.3"),
                (Ip, Destination, "10.0.0.4"),
                (Ip, Source, "10.0.0.5"),
                (Ip, Destination, "10.0.0.6"),
            ],
        );
        expect(
            "7A3F: client=mail.example.com[192.0.2.7], sasl_username=x",
            vec![
                (Host, Source, "mail.example.com"),
                (Ip, Source, "192.0.2.7"),
            ],
        );
        expect("client=unknown[192.0.2.7]", vec![(Ip, Source, "192.0.2.7")]);
        expect(
            "host=web-01 domain=evil.example.org user=bob uid=0 rhost=10.9.8.7:2222",
            vec![
                (Host, Other, "web-01"),
                (Domain, Other, "evil.example.org"),
                (User, Subject, "bob"),
                (Ip, Source, "10.9.8.7"),
            ],
        );
        expect(
            "type=USER_AUTH msg=audit(1.2:3): pid=1 uid=0 acct=\"root\" exe=\"/usr/sbin/sshd\" hostname=? addr=1.2.3.4 terminal=ssh res=failed",
            vec![(User, Subject, "root"), (Ip, Source, "1.2.3.4")],
        );
        expect(
            "user=- ruser=(unknown) user=UNKNOWN rhost= logname= user=\"\" user=?",
            vec![],
        );
        expect("user=\"unterminated rest", vec![]);
        expect("user='carol' ok", vec![(User, Subject, "carol")]);
        expect(
            "user=dave, src=1.2.3.4;",
            vec![(User, Subject, "dave"), (Ip, Source, "1.2.3.4")],
        );
    }

    #[test]
    fn dns() {
        expect(
            "query[A] example.com from 10.0.0.9",
            vec![(Domain, Other, "example.com"), (Ip, Source, "10.0.0.9")],
        );
        expect(
            "forwarded example.com to 8.8.8.8",
            vec![(Domain, Other, "example.com"), (Ip, Destination, "8.8.8.8")],
        );
        expect(
            "reply example.com is 93.184.216.34",
            vec![(Domain, Other, "example.com"), (Ip, Other, "93.184.216.34")],
        );
        expect(
            "cached example.com is NXDOMAIN",
            vec![(Domain, Other, "example.com")],
        );
        expect(
            "client @0x7f3a2c 10.0.0.1#53211 (example.com): query: example.com IN A +E(0)K (10.0.0.2)",
            vec![
                (Ip, Source, "10.0.0.1"),
                (Domain, Other, "example.com"),
                (Ip, Other, "10.0.0.2"),
            ],
        );
    }

    #[test]
    fn web_access_log() {
        expect(
            r#"203.0.113.9 - bob [21/Nov/2026:10:00:00 +0000] "GET /admin HTTP/1.1" 401 512 "-" "curl/8.0""#,
            vec![(Ip, Source, "203.0.113.9"), (User, Subject, "bob")],
        );
        expect(
            r#"2001:db8::9 - - [21/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 5 "-" "x""#,
            vec![(Ip, Source, "2001:db8::9")],
        );
    }

    #[test]
    fn bare_addresses() {
        expect(
            "ping ::1 and fe80::1%eth0, 10.0.0.1:8080 [2001:db8::2]:443 ::ffff:192.0.2.1 1.2.3.4. 2001:db8:0:0:0:0:0:1 x=10.1.1.1/24",
            vec![
                (Ip, Other, "::1"),
                (Ip, Other, "fe80::1"),
                (Ip, Other, "10.0.0.1"),
                (Ip, Other, "2001:db8::2"),
                (Ip, Other, "::ffff:192.0.2.1"),
                (Ip, Other, "1.2.3.4"),
                (Ip, Other, "2001:db8:0:0:0:0:0:1"),
                (Ip, Other, "10.1.1.1"),
            ],
        );
        expect(
            "version 2.6.5-1.358 at 10:00:01 MAC 00:11:22:33:44:55 oid 1.3.6.1.4.1 256.1.1.1 host1.2.3.4.example dsl-1.2.3.4.isp 1.2.3 \
             std::vector :: 1.2.3.4567 00:11:22:33:44:55:66:77 1:2:3:4:5:6:7:8:9 v1.2.3.4 12:34:56.789 e820: [0.000000]",
            vec![],
        );
        // Exact ranges, not just texts.
        let msg = "a 10.0.0.1:22 b";
        let mut out = Vec::with_capacity(4);
        extract_entities(msg, &mut out);
        assert_eq!(
            out,
            vec![TextEntity {
                kind: Ip,
                role: Other,
                range: 2..10
            }]
        );
    }

    #[test]
    fn capacity_bounds_output_and_never_grows() {
        let msg = "SRC=1.1.1.1 DST=2.2.2.2 3.3.3.3 4.4.4.4 5.5.5.5";
        let mut out = Vec::with_capacity(3);
        out.push(TextEntity {
            kind: Ip,
            role: Other,
            range: 0..3,
        });
        extract_entities(msg, &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(out.capacity(), 3);
        assert_eq!(out[0].range, 0..3, "existing entries are kept");
        assert_eq!(
            out[1],
            TextEntity {
                kind: Ip,
                role: Source,
                range: 4..11
            }
        );
        // The earlier entry with the same (kind, range) belongs to another message: no de-dup.
        let mut out = Vec::with_capacity(8);
        out.push(TextEntity {
            kind: Ip,
            role: Other,
            range: 4..11,
        });
        extract_entities(msg, &mut out);
        assert_eq!(out.len(), 6);
        let mut empty = Vec::new();
        extract_entities(msg, &mut empty);
        assert!(empty.is_empty() && empty.capacity() == 0);
    }

    #[test]
    fn ipv6_validation() {
        for ok in [
            "::1",
            "1::",
            "fe80::1",
            "2001:db8::",
            "1:2:3:4:5:6:7:8",
            "1:2:3:4:5:6::8",
            "::ffff:1.2.3.4",
            "1:2:3:4:5:6:1.2.3.4",
            "AbCd::eF01",
        ] {
            assert!(is_ipv6(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "::",
            ":",
            "1:2",
            "1:2:3",
            "1:2:3:4:5:6:7",
            "1:2:3:4:5:6:7:8:9",
            "1::2::3",
            ":1::",
            "12345::",
            "1:::2",
            "::1.2.3",
            "1.2.3.4::",
            "::1.2.3.4:1",
            "1:2:3:4:5:6:7::8:9",
            "aa:bb:cc:dd:ee:ff:00:11",
            "g::1",
        ] {
            assert!(!is_ipv6(bad.as_bytes()), "{bad}");
        }
    }

    /// A deliberately naive dotted-quad finder, independent of the extractor's scanner: words of
    /// `[0-9A-Za-z.-]` that are exactly four decimal octets (after a sentence-final '.').
    fn naive_ipv4s(msg: &str) -> Vec<&str> {
        msg.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'))
            .map(|t| t.trim_end_matches('.'))
            .filter(|t| {
                let parts: Vec<&str> = t.split('.').collect();
                parts.len() == 4
                    && parts.iter().all(|p| {
                        !p.is_empty() && p.len() <= 3 && p.parse::<u32>().is_ok_and(|v| v <= 255)
                    })
            })
            .collect()
    }

    /// Over the Loghub OpenSSH set: every dotted quad that stands alone is extracted exactly, and the
    /// sshd phrases give the expected user roles.
    #[test]
    fn loghub_openssh() {
        let Ok(raw) = std::fs::read_to_string("/work/shared/data/loghub-2k/OpenSSH/OpenSSH_2k.log")
        else {
            eprintln!("loghub data not found, skipping");
            return;
        };
        let mut users = 0;
        for line in raw.lines() {
            let rec = crate::parse::syslog::parse_syslog(line.as_bytes(), 0);
            let msg = &line[rec.msg];
            let got = ents(msg);
            let mut ips: Vec<&str> = got.iter().filter(|e| e.0 == Ip).map(|e| e.2).collect();
            ips.sort();
            let mut want = naive_ipv4s(msg);
            want.sort();
            assert_eq!(ips, want, "{msg}");
            if msg.starts_with("Failed password for")
                || msg.starts_with("Invalid user")
                || msg.starts_with("Accepted")
            {
                assert!(got.iter().any(|e| e.0 == User && e.1 == Subject), "{msg}");
                assert!(got.iter().any(|e| e.0 == Ip && e.1 == Source), "{msg}");
                users += 1;
            }
            if msg.contains("rhost=") && msg.contains(" user=") {
                let user = msg.rsplit(" user=").next().unwrap().trim();
                assert!(got.contains(&(User, Subject, user)), "{msg}");
            }
            if msg.starts_with("reverse mapping") {
                assert!(got.iter().any(|e| e.0 == Host && e.1 == Source), "{msg}");
            }
        }
        assert!(users > 500, "{users}");
    }

    #[test]
    fn loghub_linux() {
        let Ok(raw) = std::fs::read_to_string("/work/shared/data/loghub-2k/Linux/Linux_2k.log")
        else {
            eprintln!("loghub data not found, skipping");
            return;
        };
        let mut hosts = 0;
        for line in raw.lines() {
            let rec = crate::parse::syslog::parse_syslog(line.as_bytes(), 0);
            let msg = &line[rec.msg];
            let got = ents(msg);
            let mut ips: Vec<&str> = got.iter().filter(|e| e.0 == Ip).map(|e| e.2).collect();
            ips.sort();
            let mut want = naive_ipv4s(msg);
            want.sort();
            assert_eq!(ips, want, "{msg}");
            let rhost = msg
                .split("rhost=")
                .nth(1)
                .map(|r| r.split(' ').next().unwrap());
            if let Some(h) = rhost.filter(|h| !h.is_empty()) {
                if h.bytes().any(|b| b.is_ascii_alphabetic()) {
                    assert!(got.contains(&(Host, Source, h)), "{msg}");
                    hosts += 1;
                } else {
                    assert!(got.contains(&(Ip, Source, h)), "{msg}");
                }
            }
            if msg.starts_with("session opened for user") {
                assert!(got.iter().any(|e| e.0 == User && e.1 == Subject), "{msg}");
            }
        }
        assert!(hosts > 50, "{hosts}");
    }

    #[test]
    fn fuzz_never_panics_and_ranges_are_sound() {
        let seeds = [
            "Failed password for invalid user admin from 1.2.3.4 port 4242 ssh2",
            "pam_unix(su:auth): authentication failure; logname=alice uid=1000 ruser=alice rhost=h.example  user=root",
            "alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; COMMAND=/bin/cat",
            "SRC=fe80::1%eth0 DST=::ffff:1.2.3.4 client=x.example[10.0.0.1] acct=\"é\" query[A] ex.com from ::1:",
            "203.0.113.9 - bob [21/Nov/2026:10:00:00 +0000] \"GET /\" (to root) josé on pts/1",
            "session opened for user root(uid=0) by alice(uid=1000) (root) CMD (x) reverse mapping checking getaddrinfo for a.b [1.2.3.4] failed",
        ];
        let mut x: u64 = 0x0123_4567_89AB_CDEF;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let alphabet = b" =:.[]()\"'0123456789abcdef%-,;user@from";
        let mut buf: Vec<u8> = Vec::new();
        let mut out = Vec::with_capacity(16);
        for i in 0..30_000 {
            buf.clear();
            if i % 10 == 0 {
                for _ in 0..next() % 100 {
                    buf.push(alphabet[next() as usize % alphabet.len()]);
                }
            } else {
                buf.extend_from_slice(seeds[i % seeds.len()].as_bytes());
                for _ in 0..(next() % 6) {
                    let r = next();
                    let len = buf.len();
                    match r % 5 {
                        0 if len > 0 => buf[(r >> 8) as usize % len] = (r >> 16) as u8,
                        1 if len > 0 => buf.truncate((r >> 8) as usize % len),
                        2 if len > 0 => {
                            buf.remove((r >> 8) as usize % len);
                        }
                        _ => buf.insert(
                            (r >> 8) as usize % (len + 1),
                            alphabet[(r >> 16) as usize % alphabet.len()],
                        ),
                    }
                }
            }
            let msg = String::from_utf8_lossy(&buf);
            out.clear();
            let cap = out.capacity();
            extract_entities(&msg, &mut out);
            assert_eq!(out.capacity(), cap);
            check_sound(&msg, &out, 0);
        }
    }

    #[test]
    fn huge_and_hostile_lines() {
        let mut out = Vec::with_capacity(8);
        let unterminated = "user=\"x ".repeat(1 << 17);
        extract_entities(&unterminated, &mut out);
        check_sound(&unterminated, &out, 0);
        out.clear();
        let dots = "1.".repeat(1 << 19);
        extract_entities(&dots, &mut out);
        assert!(out.is_empty());
        let colons = "a:".repeat(1 << 19);
        extract_entities(&colons, &mut out);
        assert!(out.is_empty());
        let mut many = "from 1.2.3.4 ".repeat(1 << 16);
        many.push_str(&" ".repeat(1 << 20));
        extract_entities(&many, &mut out);
        assert_eq!(out.len(), 8);
    }
}
