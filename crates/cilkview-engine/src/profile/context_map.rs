//! The *prof* data structure of the Cilkprof paper (§5, Figure 4): a sparse map from a key (here a
//! calling-context id) to an [`Entry`], supporting update, union, assign and free in Θ(1) amortized
//! time. A prof is a singly linked list of updates (nodes live in one shared [`Arena`], so
//! concatenating and freeing a list are O(1) pointer splices) plus, once the list has grown to the
//! number S of keys, a dense array of S entries into which the list is flushed.

/// The on-span data of one calling context, summed over the invocations it holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Work of the top-call-site invocations (whole invocation).
    pub on_span_work: u64,
    /// Span of the top-call-site invocations.
    pub on_span_span: u64,
    /// Work of the invocations, excluding the invocations of call sites nested in them.
    pub local_work: u64,
    /// Length of the critical path's strands that ran directly in the invocations.
    pub local_span: u64,
    /// Invocations on the critical path (recursive ones included).
    pub count: u64,
}

impl Entry {
    fn add(&mut self, o: &Entry) {
        self.on_span_work = self.on_span_work.wrapping_add(o.on_span_work);
        self.on_span_span = self.on_span_span.wrapping_add(o.on_span_span);
        self.local_work = self.local_work.wrapping_add(o.local_work);
        self.local_span = self.local_span.wrapping_add(o.local_span);
        self.count = self.count.wrapping_add(o.count);
    }
}

const NIL: u32 = u32::MAX;
/// A freed prof's array of more entries than this is given back to the allocator, not kept
/// (its filling costs more than its allocation, and a run with that many contexts keeps few).
const KEPT_ARRAY: usize = 1 << 16;

#[derive(Clone, Copy, Debug)]
struct Node {
    key: u32,
    next: u32,
    entry: Entry,
}

/// Storage of every list node of every prof, with a free list, and of every dense array, by
/// id, with the ids of those not in use (kept for the next flushes, as many as were in use at
/// once: no allocation per flush; the largest given back, see `KEPT_ARRAY`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Arena {
    nodes: Vec<Node>,
    free: u32,
    arrays: Vec<Box<[Entry]>>,
    free_arrays: Vec<u32>,
}

impl Arena {
    pub fn new() -> Self {
        Arena {
            nodes: Vec::new(),
            free: NIL,
            arrays: Vec::new(),
            free_arrays: Vec::new(),
        }
    }

    /// The id of a dense array of at least `keys` entries, all zero.
    fn array(&mut self, keys: usize) -> u32 {
        match self.free_arrays.pop() {
            Some(id) => {
                let a = &mut self.arrays[id as usize];
                if a.len() >= keys {
                    a.fill(Entry::default());
                } else {
                    *a = vec![Entry::default(); keys].into_boxed_slice();
                }
                id
            }
            None => {
                self.arrays
                    .push(vec![Entry::default(); keys].into_boxed_slice());
                (self.arrays.len() - 1) as u32
            }
        }
    }

    /// Array `id` is no longer in use.
    #[inline(never)]
    fn release(&mut self, id: u32) {
        let a = &mut self.arrays[id as usize];
        if a.len() > KEPT_ARRAY {
            *a = Box::default();
        }
        self.free_arrays.push(id);
    }

    #[inline(always)]
    fn alloc(&mut self, key: u32, entry: Entry) -> u32 {
        let node = Node {
            key,
            next: NIL,
            entry,
        };
        if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        }
    }

    /// Nodes in use: those not on the free list (for tests of the memory bound; counted
    /// here, not at each allocation and free).
    #[cfg(test)]
    fn live(&self) -> usize {
        let mut free = 0;
        let mut i = self.free;
        while i != NIL {
            free += 1;
            i = self.nodes[i as usize].next;
        }
        self.nodes.len() - free
    }

    /// Capacity in nodes (the high-water mark of live nodes).
    pub fn capacity(&self) -> usize {
        self.nodes.len()
    }
}

/// One sparse profile: a list of updates and, once flushed, a dense array (by its id in the
/// arena; `NIL`: none). Four words: a path that holds one moves cheaply.
#[derive(Clone, Debug)]
pub(crate) struct ContextMap {
    head: u32,
    tail: u32,
    len: u32,
    arr: u32,
}

impl Default for ContextMap {
    fn default() -> Self {
        ContextMap {
            head: NIL,
            tail: NIL,
            len: 0,
            arr: NIL,
        }
    }
}

impl ContextMap {
    /// UPDATE: adds `entry` at `key`; `keys` is the current number S of keys.
    #[inline(always)]
    pub fn update(&mut self, arena: &mut Arena, keys: usize, key: u32, entry: Entry) {
        if self.arr != NIL {
            if let Some(slot) = arena.arrays[self.arr as usize].get_mut(key as usize) {
                slot.add(&entry);
                return;
            }
        }
        if self.head != NIL {
            // The list's last update was at the same key (invocations of one context in a row,
            // a recursion's folded into it): added there, no node.
            let tail = &mut arena.nodes[self.tail as usize];
            if tail.key == key {
                tail.entry.add(&entry);
                return;
            }
        }
        self.append(arena, keys, key, &entry);
    }

    /// [`ContextMap::update`] with a new node at the end of the list (in line; its flush, once
    /// the list has S entries, out of line).
    #[inline(always)]
    fn append(&mut self, arena: &mut Arena, keys: usize, key: u32, entry: &Entry) {
        let node = arena.alloc(key, *entry);
        if self.head == NIL {
            self.head = node;
        } else {
            arena.nodes[self.tail as usize].next = node;
        }
        self.tail = node;
        self.len += 1;
        if self.len as usize >= keys {
            self.flush(arena, keys);
        }
    }

    /// Whether the prof holds nothing (no list, no array): both ids `NIL`, all ones.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.head & self.arr == NIL
    }

    /// UNION: moves everything of `other` into `self`, leaving `other` empty.
    pub fn union(&mut self, arena: &mut Arena, keys: usize, other: &mut ContextMap) {
        let other = std::mem::take(other);
        if other.arr != NIL {
            if self.arr == NIL {
                self.arr = other.arr;
            } else {
                let (a, b) = (self.arr as usize, other.arr as usize);
                let (big, small) = if arena.arrays[a].len() >= arena.arrays[b].len() {
                    (a, b)
                } else {
                    (b, a)
                };
                let added = std::mem::take(&mut arena.arrays[small]);
                for (x, y) in arena.arrays[big].iter_mut().zip(added.iter()) {
                    x.add(y);
                }
                arena.arrays[small] = added;
                arena.release(small as u32);
                self.arr = big as u32;
            }
        }
        if other.head != NIL {
            if self.head == NIL {
                self.head = other.head;
            } else {
                arena.nodes[self.tail as usize].next = other.head;
            }
            self.tail = other.tail;
            self.len += other.len;
        }
        if self.len as usize >= keys && self.len > 0 {
            self.flush(arena, keys);
        }
    }

    /// INIT: empties the prof (O(1): the list is spliced onto the free list, the array kept for
    /// another).
    #[inline(always)]
    pub fn free(&mut self, arena: &mut Arena) {
        if self.head != NIL {
            arena.nodes[self.tail as usize].next = arena.free;
            arena.free = self.head;
        }
        if self.arr != NIL {
            arena.release(self.arr);
        }
        *self = ContextMap::default();
    }

    /// Moves the list into a dense array of `keys` entries.
    #[inline(never)]
    fn flush(&mut self, arena: &mut Arena, keys: usize) {
        let arr = match self.arr {
            NIL => arena.array(keys),
            a if arena.arrays[a as usize].len() >= keys => a,
            a => {
                let grown = arena.array(keys);
                let old = std::mem::take(&mut arena.arrays[a as usize]);
                arena.arrays[grown as usize][..old.len()].copy_from_slice(&old);
                arena.arrays[a as usize] = old;
                arena.release(a);
                grown
            }
        };
        let mut i = self.head;
        while i != NIL {
            let n = arena.nodes[i as usize];
            arena.arrays[arr as usize][n.key as usize].add(&n.entry);
            i = n.next;
        }
        self.arr = NIL;
        self.free(arena);
        self.arr = arr;
    }

    /// PRINT: every (key, entry) with the entries of one key summed; empties the prof.
    pub fn drain(&mut self, arena: &mut Arena, keys: usize) -> Vec<(u32, Entry)> {
        self.flush(arena, keys.max(1));
        let out = arena.arrays[self.arr as usize]
            .iter()
            .enumerate()
            .filter(|(_, e)| **e != Entry::default())
            .map(|(k, e)| (k as u32, *e))
            .collect();
        self.free(arena);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(x: u64) -> Entry {
        Entry {
            local_span: x,
            count: 1,
            ..Entry::default()
        }
    }

    #[test]
    fn update_union_free_and_drain() {
        let mut arena = Arena::new();
        let (mut a, mut b) = (ContextMap::default(), ContextMap::default());
        let keys = 4;
        a.update(&mut arena, keys, 0, e(1));
        a.update(&mut arena, keys, 2, e(2));
        b.update(&mut arena, keys, 2, e(3));
        a.union(&mut arena, keys, &mut b);
        assert_eq!(b.len, 0);
        let mut c = ContextMap::default();
        for k in 0..4 {
            c.update(&mut arena, keys, k, e(10)); // reaches S: flushed into an array
        }
        assert!(c.arr != NIL && c.len == 0);
        a.union(&mut arena, keys, &mut c);
        let got = a.drain(&mut arena, keys);
        let spans: Vec<(u32, u64, u64)> = got
            .iter()
            .map(|(k, e)| (*k, e.local_span, e.count))
            .collect();
        assert_eq!(spans, [(0, 11, 2), (1, 10, 1), (2, 15, 3), (3, 10, 1)]);
        assert_eq!(arena.live(), 0);
        let mut d = ContextMap::default();
        d.update(&mut arena, keys, 1, e(1));
        d.free(&mut arena);
        assert_eq!(arena.live(), 0);
        // Freed nodes are reused.
        let cap = arena.capacity();
        d.update(&mut arena, keys, 1, e(1));
        assert_eq!(arena.capacity(), cap);
    }

    #[test]
    fn keys_discovered_after_the_array_grows_it() {
        let mut arena = Arena::new();
        let mut a = ContextMap::default();
        a.update(&mut arena, 1, 0, e(1)); // S = 1: array of 1
        a.update(&mut arena, 3, 2, e(2)); // key 2 beyond the array: listed
        a.update(&mut arena, 3, 1, e(3));
        let got = a.drain(&mut arena, 3);
        assert_eq!(got.len(), 3);
        assert_eq!(got[2].1.local_span, 2);
    }
}
