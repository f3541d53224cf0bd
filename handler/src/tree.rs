//! BLAKE3's hash tree kept beside a blob (an "outboard"), so that any group
//! of the content can be verified against the recorded root without reading
//! the rest.
//!
//! BLAKE3 hashes 1 KiB chunks into a binary tree whose left subtrees are
//! always the largest power of two of chunks that leaves something on the
//! right. A group here is [`GROUP`] bytes (64 chunks, an aligned subtree of
//! that tree), so the groups form the same shape: group `g`'s chaining value
//! is a leaf, and every aligned power-of-two run of groups is a node.
//!
//! The outboard is an 8-byte header then the chaining values of every
//! *complete* node (one covering `2^level` groups, the root excluded) in
//! post-order: exactly the order in which they complete while the content
//! streams past, so an upload writes it as it hashes, holding only a stack
//! of `log2(groups)` values. The nodes of the right edge that cover fewer
//! groups are never stored: a proof computes them from their children.
//! About 0.1 % of the content at 64 KiB groups.
//!
//! The code is BLAKE3's own subtree API (`blake3::hazmat`); `bao-tree` does
//! this too, but needs the content's size before it hashes (for its tree
//! layout), and uploads here arrive in chunks of unknown length.
//!
//! Verifying groups `a..b` ([`Shape::proof`]): read their leaves and the
//! stored siblings of the smallest set of nodes covering them (about
//! `2·log2(groups)` values), recompute the root, and compare it with the
//! recorded BLAKE3; the leaves are then trusted, and each group's bytes are
//! checked against its leaf as they are read.

use std::marker::PhantomData;

use blake3::hazmat::{ChainingValue, Mode, merge_subtrees_non_root, merge_subtrees_root};

use crate::digests::Digests;

/// Bytes in a group, the unit of verification: [`crate::digests`] hashes
/// one group a call.
pub use crate::digests::{GROUP, GROUP_LOG};
/// The outboard's header: magic, version, the group's log2 size, reserved.
pub const HEADER: [u8; 8] = [b'w', b's', b'o', b'b', 1, GROUP_LOG as u8, 0, 0];
/// Bytes of one stored chaining value.
pub const NODE: u64 = 32;

/// A node of the tree over groups: covers groups
/// `index << level .. (index + 1) << level` (fewer on the right edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub level: u32,
    pub index: u64,
}

/// Groups in content of `size` bytes (at least one).
pub fn groups(size: u64) -> u64 {
    size.div_ceil(GROUP).max(1)
}

/// The tree of content of a given size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    groups: u64,
}

impl Shape {
    pub fn of(size: u64) -> Self {
        Self {
            groups: groups(size),
        }
    }

    pub fn groups(self) -> u64 {
        self.groups
    }

    /// Whether content this size has an outboard (more than one group;
    /// one group is verified by hashing it whole).
    pub fn has_outboard(self) -> bool {
        self.groups > 1
    }

    /// Bytes of this content's outboard, header included.
    pub fn outboard_len(self) -> u64 {
        if !self.has_outboard() {
            return 0;
        }
        let n = self.groups;
        let root_stored = u64::from(n.is_power_of_two());
        HEADER.len() as u64 + NODE * (2 * n - u64::from(n.count_ones()) - root_stored)
    }

    /// Where node's chaining value is in the outboard, if it is stored.
    pub fn offset(self, node: Node) -> Option<u64> {
        let end = (node.index + 1).checked_shl(node.level)?;
        if end > self.groups || node.level >= self.root_level() {
            return None;
        }
        // Nodes completed before group `end - 1`'s leaf: 2e - popcount(e)
        // for e = end - 1 groups, then the leaf and `level` merges.
        let before = end - 1;
        let position = 2 * before - u64::from(before.count_ones()) + u64::from(node.level);
        Some(HEADER.len() as u64 + NODE * position)
    }

    fn root_level(self) -> u32 {
        // The smallest level whose one node covers every group.
        64 - (self.groups - 1).leading_zeros()
    }

    /// The stored nodes a proof of groups `span` needs, in the order
    /// [`Shape::root_from`] takes them. `span` must be within the groups.
    pub fn proof(self, span: std::ops::Range<u64>) -> Vec<Node> {
        let mut needed = Vec::new();
        self.walk(
            Node {
                level: self.root_level(),
                index: 0,
            },
            &span,
            &mut |node| {
                needed.push(node);
                [0; 32]
            },
        );
        needed
    }

    /// The root recomputed from the values of [`Shape::proof`]'s nodes, in
    /// its order: what to compare with the recorded BLAKE3.
    pub fn root_from(self, span: std::ops::Range<u64>, values: &[ChainingValue]) -> blake3::Hash {
        let mut values = values.iter();
        let root = Node {
            level: self.root_level(),
            index: 0,
        };
        let (left, right) = self.children(root);
        let mut next = |_: Node| values.next().copied().unwrap_or([0; 32]);
        let left = self.walk(left, &span, &mut next);
        let right = self.walk(right, &span, &mut next);
        merge_subtrees_root(&left, &right, Mode::Hash)
    }

    fn children(self, node: Node) -> (Node, Node) {
        let level = node.level - 1;
        (
            Node {
                level,
                index: 2 * node.index,
            },
            Node {
                level,
                index: 2 * node.index + 1,
            },
        )
    }

    /// The chaining value of `node` (not the root), from stored values
    /// (`stored`) where it is complete and outside `span` or a leaf, else
    /// merged from its children.
    fn walk(
        self,
        node: Node,
        span: &std::ops::Range<u64>,
        stored: &mut impl FnMut(Node) -> ChainingValue,
    ) -> ChainingValue {
        let start = node.index << node.level;
        let end = ((node.index + 1) << node.level).min(self.groups);
        let complete = (node.index + 1) << node.level <= self.groups;
        let touches_span = start < span.end && span.start < end;
        if node.level == 0 || (complete && !touches_span) {
            return stored(node);
        }
        let (left, right) = self.children(node);
        let left_value = self.walk(left, span, stored);
        if right.index << right.level >= self.groups {
            // The right edge: this node is its left child.
            return left_value;
        }
        let right_value = self.walk(right, span, stored);
        merge_subtrees_non_root(&left_value, &right_value, Mode::Hash)
    }
}

/// The BLAKE3 of `content`, whole in memory: of one group directly, else
/// through a [`TreeWriter`] (its outboard dropped).
pub fn root_of<D: Digests>(content: &[u8]) -> blake3::Hash {
    if content.len() as u64 <= GROUP {
        return D::blake3_one_group(content).into();
    }
    let mut tree = TreeWriter::<D>::new();
    tree.update(content);
    tree.finish().0
}

/// Hashes content as it streams past, writing its outboard as nodes
/// complete, each group's value computed by `D`. Memory: the bytes of the
/// current group when they came in pieces (at most one group) and a stack
/// of `log2(groups)` values.
#[derive(Debug)]
pub struct TreeWriter<D> {
    current: Current,
    /// Groups whose leaf is out.
    done: u64,
    stack: Vec<ChainingValue>,
    /// Outboard bytes not yet taken.
    out: Vec<u8>,
    digests: PhantomData<D>,
}

/// The group being written.
#[derive(Debug)]
enum Current {
    /// Its bytes so far: fewer than a group, or the whole first group,
    /// whose value depends on whether content follows it (alone, it is the
    /// root).
    Filling(Vec<u8>),
    /// A whole later group, hashed; its leaf goes out when content follows
    /// it or the content ends.
    Hashed(ChainingValue),
}

impl<D: Digests> Default for TreeWriter<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Digests> TreeWriter<D> {
    pub fn new() -> Self {
        Self::resume(0, Vec::new())
    }

    /// Take up a stream after its first `done` groups closed with content
    /// after them, leaving `stack` ([`crate::hashes::HashState`]).
    pub fn resume(done: u64, stack: Vec<ChainingValue>) -> Self {
        Self {
            current: Current::Filling(Vec::new()),
            done,
            stack,
            out: Vec::new(),
            digests: PhantomData,
        }
    }

    /// Whether the current group is full: the next byte closes it.
    pub fn group_full(&self) -> bool {
        self.in_group() == GROUP
    }

    /// Bytes in the current group.
    pub fn in_group(&self) -> u64 {
        match &self.current {
            Current::Filling(bytes) => bytes.len() as u64,
            Current::Hashed(_) => GROUP,
        }
    }

    /// Groups closed so far.
    pub fn groups_closed(&self) -> u64 {
        self.done
    }

    /// The values of the complete subtrees so far, left to right.
    pub fn stack(&self) -> &[ChainingValue] {
        &self.stack
    }

    pub fn update(&mut self, mut bytes: &[u8]) {
        let whole = crate::to_index(GROUP);
        while !bytes.is_empty() {
            let filled = match &mut self.current {
                Current::Filling(filled) if filled.len() < whole => filled,
                _ => {
                    // More content follows, so the full group is not the root.
                    self.push_leaf(false);
                    continue;
                }
            };
            let take = (whole - filled.len()).min(bytes.len());
            let (now, rest) = bytes.split_at(take);
            bytes = rest;
            if self.done > 0 && take == whole {
                // A whole later group in one piece: hashed where it lies.
                self.current = Current::Hashed(D::blake3_group(self.done, now));
                continue;
            }
            filled.extend_from_slice(now);
            if self.done > 0 && filled.len() == whole {
                self.current = Current::Hashed(D::blake3_group(self.done, filled));
            }
        }
    }

    /// Outboard bytes written since the last call.
    pub fn take_outboard(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Outboard bytes waiting to be taken.
    pub fn pending_outboard(&self) -> usize {
        self.out.len()
    }

    /// The content's BLAKE3 (as `blake3::hash` gives it) and the last of its
    /// outboard (empty for content of one group).
    pub fn finish(mut self) -> (blake3::Hash, Vec<u8>) {
        if let (0, Current::Filling(bytes)) = (self.done, &self.current) {
            // One group (the first is never hashed ahead): it is the root.
            return (D::blake3_one_group(bytes).into(), Vec::new());
        }
        self.push_leaf(true);
        let mut right = self.stack.pop().expect("two subtrees at least");
        while self.stack.len() > 1 {
            let left = self.stack.pop().expect("checked");
            right = merge_subtrees_non_root(&left, &right, Mode::Hash);
        }
        let left = self.stack.pop().expect("two subtrees at least");
        (merge_subtrees_root(&left, &right, Mode::Hash), self.out)
    }

    fn push_leaf(&mut self, last: bool) {
        let leaf = match std::mem::replace(&mut self.current, Current::Filling(Vec::new())) {
            Current::Hashed(value) => value,
            Current::Filling(mut bytes) => {
                let value = D::blake3_group(self.done, &bytes);
                // Its room serves the next group.
                bytes.clear();
                self.current = Current::Filling(bytes);
                value
            }
        };
        if self.done == 0 {
            self.out.extend_from_slice(&HEADER);
        }
        self.done += 1;
        self.emit(leaf);
        // Merge the complete subtrees this leaf closes; at the end, never
        // the last two (their merge is the root).
        let mut total = self.done;
        while total & 1 == 0 && (!last || self.stack.len() > 2) {
            let right = self.stack.pop().expect("a pair");
            let left = self.stack.pop().expect("a pair");
            let merged = merge_subtrees_non_root(&left, &right, Mode::Hash);
            self.emit(merged);
            total >>= 1;
        }
    }

    fn emit(&mut self, value: ChainingValue) {
        self.out.extend_from_slice(&value);
        self.stack.push(value);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::digests::Local;

    fn content(size: usize) -> Vec<u8> {
        (0..size).map(|i| (i * 31 + i / 977) as u8).collect()
    }

    fn write(data: &[u8], piece: usize) -> (blake3::Hash, Vec<u8>) {
        let mut writer = TreeWriter::<Local>::new();
        let mut outboard = Vec::new();
        for chunk in data.chunks(piece.max(1)) {
            writer.update(chunk);
            outboard.extend(writer.take_outboard());
        }
        let (root, rest) = writer.finish();
        outboard.extend(rest);
        (root, outboard)
    }

    fn stored(outboard: &[u8], shape: Shape, node: Node) -> ChainingValue {
        let at = shape.offset(node).expect("a stored node") as usize;
        outboard[at..at + 32].try_into().unwrap()
    }

    const G: usize = GROUP as usize;
    const SIZES: &[usize] = &[
        0,
        1,
        G - 1,
        G,
        G + 1,
        2 * G,
        3 * G + 5,
        4 * G,
        5 * G,
        6 * G,
        7 * G - 1,
        8 * G,
        9 * G + 1,
        13 * G + 100,
        16 * G,
        17 * G,
    ];

    #[test]
    fn the_root_is_blake3_and_the_outboard_has_its_length() {
        for &size in SIZES {
            let data = content(size);
            for piece in [1000, G, 3 * G + 7] {
                let (root, outboard) = write(&data, piece);
                assert_eq!(root, blake3::hash(&data), "size {size} piece {piece}");
                let shape = Shape::of(size as u64);
                assert_eq!(outboard.len() as u64, shape.outboard_len(), "size {size}");
                if shape.has_outboard() {
                    assert_eq!(outboard[..8], HEADER);
                }
            }
        }
    }

    #[test]
    fn whole_content_hashes_to_blake3_on_either_side_of_a_group() {
        for &size in SIZES {
            let data = content(size);
            assert_eq!(root_of::<Local>(&data), blake3::hash(&data), "size {size}");
        }
    }

    #[test]
    fn stored_leaves_are_the_groups_values() {
        for &size in SIZES {
            let data = content(size);
            let (_, outboard) = write(&data, 4096);
            let shape = Shape::of(size as u64);
            if !shape.has_outboard() {
                continue;
            }
            for (index, group) in data.chunks(G).enumerate() {
                let leaf = Node {
                    level: 0,
                    index: index as u64,
                };
                assert_eq!(
                    stored(&outboard, shape, leaf),
                    Local::blake3_group(index as u64, group)
                );
            }
        }
    }

    #[test]
    fn every_span_proves_against_the_root_and_a_changed_value_does_not() {
        for &size in SIZES {
            let data = content(size);
            let (root, outboard) = write(&data, G);
            let shape = Shape::of(size as u64);
            if !shape.has_outboard() {
                continue;
            }
            let n = shape.groups();
            for a in 0..n {
                for b in a + 1..=n {
                    let needed = shape.proof(a..b);
                    let mut values: Vec<_> = needed
                        .iter()
                        .map(|&node| stored(&outboard, shape, node))
                        .collect();
                    assert_eq!(
                        shape.root_from(a..b, &values),
                        root,
                        "size {size} span {a}..{b}"
                    );
                    values[0][3] ^= 1;
                    assert_ne!(shape.root_from(a..b, &values), root);
                }
            }
        }
    }

    #[test]
    fn a_proof_reads_logarithmically_many_nodes() {
        let shape = Shape::of(1 << 30);
        assert_eq!(shape.groups(), 16384);
        // One leaf and one sibling per level.
        assert_eq!(shape.proof(8000..8001).len(), 15);
        // A whole batch: its leaves plus a few siblings.
        assert!(shape.proof(512..1024).len() <= 512 + 15);
    }
}
