//! A restricted pickle reader: the opcodes `torch.save` writes (protocols 2 to 5), run as a
//! stack machine that builds plain values (numbers, strings, tuples, lists, dicts) and asks its
//! [`Machine`] for everything else: what a global names, what a persistent id stands for, what
//! a call (`REDUCE`) or a state update (`BUILD`) makes. It runs no code: a global the machine
//! does not know is the machine's error, and every opcode outside the list in [`load`] is an
//! error too.
//!
//! Malicious input cannot make it panic or recurse: every length is checked against the bytes
//! left, the stack and the memo are capped ([`MAX_STACK`], [`MAX_MEMO`]), and containers are
//! released without recursion however deeply they nest.

use crate::error::ErrorKind;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// The most values the stack may hold at once (far above any checkpoint's needs).
pub(crate) const MAX_STACK: usize = 1 << 20;

/// The most memo entries a pickle may make.
pub(crate) const MAX_MEMO: usize = 1 << 22;

/// Why a checkpoint (its pickle, or the archive around it) could not be read: the kind of kiln
/// error it becomes, and what was wrong.
#[derive(Debug)]
pub(crate) struct ReadError {
    /// The kind of the kiln error.
    pub kind: ErrorKind,
    /// What was wrong, as the end of a sentence about the file.
    pub message: String,
}

impl ReadError {
    /// A file that breaks the pickle format (kind `Io`, as an unreadable file).
    pub(crate) fn corrupt(message: impl Into<String>) -> ReadError {
        ReadError { kind: ErrorKind::Io, message: message.into() }
    }

    /// Something well-formed that kiln does not read (kind `Unsupported`).
    pub(crate) fn unsupported(message: impl Into<String>) -> ReadError {
        ReadError { kind: ErrorKind::Unsupported, message: message.into() }
    }
}

/// A result of the pickle reader.
pub(crate) type PResult<T> = Result<T, ReadError>;

/// A dict key: Python's `str` or `int` (the only keys a state dict uses).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// A string key.
    Str(Rc<str>),
    /// An integer key (an optimizer's parameter index).
    Int(i128),
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Str(s) => f.write_str(s),
            Key::Int(i) => write!(f, "{i}"),
        }
    }
}

/// A value on the pickle stack; `O` is what the [`Machine`] makes of globals and calls.
/// Lists and dicts are shared and mutable, as Python's are (the memo hands out references).
#[derive(Clone)]
pub(crate) enum Value<O> {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An integer (pickles may hold wider ones; those are errors).
    Int(i128),
    /// A float.
    Float(f64),
    /// A string.
    Str(Rc<str>),
    /// A `bytes` object (its contents are not kept: a state dict has no use for them).
    Bytes,
    /// A tuple.
    Tuple(Rc<Seq<O>>),
    /// A list.
    List(Rc<Seq<O>>),
    /// A dict (or `OrderedDict`), in insertion order.
    Dict(Rc<Dict<O>>),
    /// A global, or what a call made: the machine's own object.
    Object(O),
}

impl<O> Value<O> {
    /// Python's name for the value's type, for error messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes => "bytes",
            Value::Tuple(_) => "tuple",
            Value::List(_) => "list",
            Value::Dict(_) => "dict",
            Value::Object(_) => "object",
        }
    }
}

/// The items of a tuple or a list.
pub(crate) struct Seq<O>(RefCell<Vec<Value<O>>>);

impl<O: Clone> Seq<O> {
    /// A copy of the items (the values are shared handles).
    pub(crate) fn items(&self) -> Vec<Value<O>> {
        self.0.borrow().clone()
    }
}

/// A dict's entries in insertion order, with an index by key.
pub(crate) struct Dict<O>(RefCell<DictEntries<O>>);

/// What a [`Dict`] holds.
struct DictEntries<O> {
    entries: Vec<(Key, Value<O>)>,
    index: HashMap<Key, usize>,
}

impl<O> Default for DictEntries<O> {
    fn default() -> Self {
        DictEntries { entries: Vec::new(), index: HashMap::new() }
    }
}

impl<O: Clone> Dict<O> {
    /// An empty dict.
    pub(crate) fn new() -> Dict<O> {
        Dict(RefCell::new(DictEntries::default()))
    }

    /// Sets `key` to `value`: in place when the key is there, as Python does.
    fn insert(&self, key: Key, value: Value<O>) {
        let mut d = self.0.borrow_mut();
        match d.index.get(&key) {
            Some(&at) => d.entries[at].1 = value,
            None => {
                let at = d.entries.len();
                d.index.insert(key.clone(), at);
                d.entries.push((key, value));
            }
        }
    }

    /// A copy of the entries in insertion order (the values are shared handles).
    pub(crate) fn items(&self) -> Vec<(Key, Value<O>)> {
        self.0.borrow().entries.clone()
    }
}

/// Drops `pending` and every container only it holds, without recursion: a pickle can nest
/// lists a million deep, which a recursive drop would overflow the stack on.
fn release<O>(mut pending: Vec<Value<O>>) {
    while let Some(value) = pending.pop() {
        match value {
            Value::Tuple(s) | Value::List(s) => {
                if let Ok(s) = Rc::try_unwrap(s) {
                    pending.append(&mut s.0.take());
                }
            }
            Value::Dict(d) => {
                if let Ok(d) = Rc::try_unwrap(d) {
                    pending.extend(d.0.take().entries.into_iter().map(|(_, v)| v));
                }
            }
            _ => {}
        }
    }
}

impl<O> Drop for Seq<O> {
    fn drop(&mut self) {
        release(std::mem::take(self.0.get_mut()));
    }
}

impl<O> Drop for Dict<O> {
    fn drop(&mut self) {
        release(std::mem::take(self.0.get_mut()).entries.into_iter().map(|(_, v)| v).collect());
    }
}

/// What the reader asks about everything beyond plain values.
pub(crate) trait Machine {
    /// What globals and calls make.
    type Object: Clone;

    /// The global `module.name` (`GLOBAL`, `STACK_GLOBAL`); an error for any the machine does
    /// not allow.
    fn find_class(&mut self, module: &str, name: &str) -> PResult<Self::Object>;

    /// The object a persistent id stands for (`BINPERSID`).
    fn persistent_load(&mut self, pid: Value<Self::Object>) -> PResult<Value<Self::Object>>;

    /// `func(*args)` (`REDUCE`).
    fn reduce(&mut self, func: Self::Object, args: Vec<Value<Self::Object>>) -> PResult<Value<Self::Object>>;

    /// `obj.__setstate__(state)` (`BUILD`): the object afterwards.
    fn build(&mut self, obj: Value<Self::Object>, state: Value<Self::Object>) -> PResult<Value<Self::Object>>;
}

/// The bytes being read, and where.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// The next `n` bytes.
    fn take(&mut self, n: u64) -> PResult<&'a [u8]> {
        let left = self.data.len() - self.pos;
        match usize::try_from(n) {
            Ok(n) if n <= left => {
                let bytes = &self.data[self.pos..self.pos + n];
                self.pos += n;
                Ok(bytes)
            }
            _ => Err(ReadError::corrupt(format!(
                "the pickle is cut short: it needs {n} bytes at byte {} but has {left} left",
                self.pos
            ))),
        }
    }

    /// The next `N` bytes as an array.
    fn array<const N: usize>(&mut self) -> PResult<[u8; N]> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N as u64)?);
        Ok(out)
    }

    fn u8(&mut self) -> PResult<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> PResult<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> PResult<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A 4-byte signed length (`BINSTRING`, `LONG4`): negative is corrupt.
    fn i32_len(&mut self) -> PResult<u64> {
        let n = i32::from_le_bytes(self.array()?);
        u64::try_from(n).map_err(|_| ReadError::corrupt(format!("a negative length {n} at byte {}", self.pos)))
    }

    /// A line of text up to `\n` (`GLOBAL`'s module and name).
    fn line(&mut self) -> PResult<&'a str> {
        let rest = &self.data[self.pos..];
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return Err(ReadError::corrupt(format!("a GLOBAL at byte {} has no end of line", self.pos)));
        };
        self.pos += end + 1;
        std::str::from_utf8(&rest[..end])
            .map_err(|_| ReadError::corrupt(format!("a GLOBAL before byte {} is not UTF-8", self.pos)))
    }

    /// `n` bytes of UTF-8 text.
    fn text(&mut self, n: u64) -> PResult<Rc<str>> {
        let at = self.pos;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(Rc::from)
            .map_err(|_| ReadError::corrupt(format!("the string at byte {at} is not UTF-8")))
    }
}

/// An integer in little-endian two's complement (`LONG1`, `LONG4`), up to 16 bytes.
fn long(bytes: &[u8]) -> PResult<i128> {
    if bytes.len() > 16 {
        return Err(ReadError::corrupt(format!("an integer of {} bytes is too large", bytes.len())));
    }
    let fill = if bytes.last().is_some_and(|&b| b & 0x80 != 0) { 0xff } else { 0 };
    let mut wide = [fill; 16];
    wide[..bytes.len()].copy_from_slice(bytes);
    Ok(i128::from_le_bytes(wide))
}

/// The reader's state: the stack, the marks on it, the memo.
struct Vm<'m, M: Machine> {
    machine: &'m mut M,
    stack: Vec<Value<M::Object>>,
    marks: Vec<usize>,
    memo: HashMap<u64, Value<M::Object>>,
}

impl<M: Machine> Vm<'_, M> {
    fn push(&mut self, value: Value<M::Object>) -> PResult<()> {
        if self.stack.len() >= MAX_STACK {
            return Err(ReadError::corrupt(format!("the pickle stack grows past {MAX_STACK} values")));
        }
        self.stack.push(value);
        Ok(())
    }

    /// The top value, above the last mark.
    fn pop(&mut self) -> PResult<Value<M::Object>> {
        if self.stack.len() <= self.marks.last().copied().unwrap_or(0) {
            return Err(ReadError::corrupt("an opcode pops a value the stack does not have"));
        }
        Ok(self.stack.pop().expect("checked above"))
    }

    /// The values above the last mark, which is removed.
    fn pop_mark(&mut self) -> PResult<Vec<Value<M::Object>>> {
        let mark = self.marks.pop().ok_or_else(|| ReadError::corrupt("an opcode needs a MARK there is not"))?;
        Ok(self.stack.split_off(mark))
    }

    /// The top value (not popped), above the last mark.
    fn top(&self) -> PResult<&Value<M::Object>> {
        match self.stack.last() {
            Some(v) if self.stack.len() > self.marks.last().copied().unwrap_or(0) => Ok(v),
            _ => Err(ReadError::corrupt("an opcode needs a value the stack does not have")),
        }
    }

    fn memoize(&mut self, index: u64) -> PResult<()> {
        let value = self.top()?.clone();
        if self.memo.len() >= MAX_MEMO && !self.memo.contains_key(&index) {
            return Err(ReadError::corrupt(format!("the pickle memo grows past {MAX_MEMO} entries")));
        }
        self.memo.insert(index, value);
        Ok(())
    }

    fn get(&mut self, index: u64) -> PResult<()> {
        let value = self.memo.get(&index).cloned();
        let value =
            value.ok_or_else(|| ReadError::corrupt(format!("the pickle reads memo entry {index}, never set")))?;
        self.push(value)
    }

    fn tuple(&mut self, items: Vec<Value<M::Object>>) -> PResult<()> {
        self.push(Value::Tuple(Rc::new(Seq(RefCell::new(items)))))
    }

    /// Appends `items` to the list on top of the stack.
    fn extend_list(&mut self, items: Vec<Value<M::Object>>) -> PResult<()> {
        match self.top()? {
            Value::List(list) => {
                list.0.borrow_mut().extend(items);
                Ok(())
            }
            other => Err(ReadError::corrupt(format!("APPEND to a {}, not a list", other.type_name()))),
        }
    }

    /// Sets the key-value pairs `items` in the dict on top of the stack.
    fn set_items(&mut self, items: Vec<Value<M::Object>>) -> PResult<()> {
        let Value::Dict(dict) = self.top()? else {
            return Err(ReadError::corrupt(format!("SETITEM on a {}, not a dict", self.top()?.type_name())));
        };
        let dict = dict.clone();
        set_pairs(&dict, items)
    }

    fn global(&mut self, module: &str, name: &str) -> PResult<()> {
        let object = self.machine.find_class(module, name)?;
        self.push(Value::Object(object))
    }

    /// Runs the pickle in `input` up to its `STOP`.
    fn run(&mut self, input: &mut Input<'_>) -> PResult<Value<M::Object>> {
        loop {
            let at = input.pos;
            let op = input.u8()?;
            match op {
                b'.' => return self.pop(), // STOP
                0x80 => {
                    // PROTO
                    let version = input.u8()?;
                    if version > 5 {
                        return Err(ReadError::corrupt(format!("pickle protocol {version} (kiln reads 2 to 5)")));
                    }
                }
                0x95 => {
                    input.u64()?; // FRAME: the frame's length; frames need no handling here
                }
                b'c' => {
                    // GLOBAL
                    let module = input.line()?;
                    let name = input.line()?;
                    self.global(module, name)?;
                }
                0x93 => {
                    // STACK_GLOBAL
                    let (name, module) = (self.pop()?, self.pop()?);
                    let (Value::Str(module), Value::Str(name)) = (&module, &name) else {
                        return Err(ReadError::corrupt(format!("STACK_GLOBAL at byte {at} needs two strings")));
                    };
                    self.global(module, name)?;
                }
                b'q' | b'r' | 0x94 => {
                    // BINPUT, LONG_BINPUT, MEMOIZE (the next free index)
                    let index = match op {
                        b'q' => input.u8()?.into(),
                        b'r' => input.u32()?.into(),
                        _ => self.memo.len() as u64,
                    };
                    self.memoize(index)?
                }
                b'h' | b'j' => {
                    // BINGET, LONG_BINGET
                    let index = if op == b'h' { input.u8()?.into() } else { input.u32()?.into() };
                    self.get(index)?
                }
                b'(' => self.marks.push(self.stack.len()), // MARK
                b'0' => {
                    // POP: a value, or the mark on top
                    if self.stack.len() > self.marks.last().copied().unwrap_or(0) {
                        self.stack.pop();
                    } else {
                        self.pop_mark()?;
                    }
                }
                b'1' => drop(self.pop_mark()?), // POP_MARK
                b'2' => {
                    let top = self.top()?.clone();
                    self.push(top)? // DUP
                }
                b'N' => self.push(Value::None)?,
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'J' => {
                    let v = i32::from_le_bytes(input.array()?);
                    self.push(Value::Int(v.into()))? // BININT
                }
                b'K' => {
                    let v = input.u8()?;
                    self.push(Value::Int(v.into()))? // BININT1
                }
                b'M' => {
                    let v = u16::from_le_bytes(input.array()?);
                    self.push(Value::Int(v.into()))? // BININT2
                }
                0x8a => {
                    let n = input.u8()?;
                    let v = long(input.take(n.into())?)?;
                    self.push(Value::Int(v))? // LONG1
                }
                0x8b => {
                    let n = input.i32_len()?;
                    let v = long(input.take(n)?)?;
                    self.push(Value::Int(v))? // LONG4
                }
                b'G' => {
                    let v = f64::from_be_bytes(input.array()?);
                    self.push(Value::Float(v))? // BINFLOAT
                }
                b'X' => {
                    let n = input.u32()?;
                    let s = input.text(n.into())?;
                    self.push(Value::Str(s))? // BINUNICODE
                }
                0x8c => {
                    let n = input.u8()?;
                    let s = input.text(n.into())?;
                    self.push(Value::Str(s))? // SHORT_BINUNICODE
                }
                0x8d => {
                    let n = input.u64()?;
                    let s = input.text(n)?;
                    self.push(Value::Str(s))? // BINUNICODE8
                }
                b'T' => {
                    let n = input.i32_len()?;
                    let s = input.text(n)?;
                    self.push(Value::Str(s))? // BINSTRING (Python 2's str)
                }
                b'U' => {
                    let n = input.u8()?;
                    let s = input.text(n.into())?;
                    self.push(Value::Str(s))? // SHORT_BINSTRING
                }
                b'B' => {
                    let n = input.u32()?;
                    input.take(n.into())?;
                    self.push(Value::Bytes)? // BINBYTES
                }
                b'C' => {
                    let n = input.u8()?;
                    input.take(n.into())?;
                    self.push(Value::Bytes)? // SHORT_BINBYTES
                }
                0x8e => {
                    let n = input.u64()?;
                    input.take(n)?;
                    self.push(Value::Bytes)? // BINBYTES8
                }
                b')' => self.tuple(Vec::new())?, // EMPTY_TUPLE
                b't' => {
                    let items = self.pop_mark()?;
                    self.tuple(items)? // TUPLE
                }
                0x85..=0x87 => {
                    // TUPLE1, TUPLE2, TUPLE3
                    let n = usize::from(op - 0x84);
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop()?);
                    }
                    items.reverse();
                    self.tuple(items)?;
                }
                b']' => self.push(Value::List(Rc::new(Seq(RefCell::new(Vec::new())))))?, // EMPTY_LIST
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push(Value::List(Rc::new(Seq(RefCell::new(items)))))? // LIST
                }
                b'a' => {
                    let item = self.pop()?;
                    self.extend_list(vec![item])? // APPEND
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.extend_list(items)? // APPENDS
                }
                b'}' => self.push(Value::Dict(Rc::new(Dict::new())))?, // EMPTY_DICT
                b'd' => {
                    // DICT
                    let items = self.pop_mark()?;
                    let dict = Rc::new(Dict::new());
                    set_pairs(&dict, items)?;
                    self.push(Value::Dict(dict))?;
                }
                b's' => {
                    let value = self.pop()?;
                    let key = self.pop()?;
                    self.set_items(vec![key, value])? // SETITEM
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    self.set_items(items)? // SETITEMS
                }
                b'R' => {
                    // REDUCE
                    let (args, func) = (self.pop()?, self.pop()?);
                    let Value::Tuple(args) = args else {
                        return Err(ReadError::corrupt(format!(
                            "REDUCE at byte {at} with a {} of arguments",
                            args.type_name()
                        )));
                    };
                    let Value::Object(func) = func else {
                        return Err(ReadError::corrupt(format!("REDUCE at byte {at} calls a {}", func.type_name())));
                    };
                    let result = self.machine.reduce(func, args.items())?;
                    self.push(result)?;
                }
                b'b' => {
                    // BUILD
                    let (state, obj) = (self.pop()?, self.pop()?);
                    let result = self.machine.build(obj, state)?;
                    self.push(result)?;
                }
                b'Q' => {
                    // BINPERSID
                    let pid = self.pop()?;
                    let object = self.machine.persistent_load(pid)?;
                    self.push(object)?;
                }
                _ => {
                    return Err(ReadError::corrupt(format!(
                        "opcode 0x{op:02x} at byte {at} is not one of those torch.save writes for tensors and dicts"
                    )))
                }
            }
        }
    }
}

/// Sets the pairs `items` (key, value, key, value, …) in `dict`.
fn set_pairs<O: Clone>(dict: &Dict<O>, items: Vec<Value<O>>) -> PResult<()> {
    if !items.len().is_multiple_of(2) {
        return Err(ReadError::corrupt("SETITEMS with a key but no value"));
    }
    let mut items = items.into_iter();
    while let (Some(key), Some(value)) = (items.next(), items.next()) {
        let key = match key {
            Value::Str(s) => Key::Str(s),
            Value::Int(i) => Key::Int(i),
            other => {
                return Err(ReadError::unsupported(format!(
                    "a dict has a key of type {}; kiln reads str and int keys",
                    other.type_name()
                )))
            }
        };
        dict.insert(key, value);
    }
    Ok(())
}

/// Reads one pickle from the start of `data` with `machine`: its value, and the number of
/// bytes it took (up to and including its `STOP`).
///
/// The opcodes read: `PROTO` (2 to 5), `FRAME`, `STOP`, `GLOBAL`, `STACK_GLOBAL`, `BINPUT`,
/// `LONG_BINPUT`, `MEMOIZE`, `BINGET`, `LONG_BINGET`, `MARK`, `POP`, `POP_MARK`, `DUP`,
/// `NONE`, `NEWTRUE`, `NEWFALSE`, `BININT`, `BININT1`, `BININT2`, `LONG1`, `LONG4`,
/// `BINFLOAT`, `BINUNICODE`, `SHORT_BINUNICODE`, `BINUNICODE8`, `BINSTRING`,
/// `SHORT_BINSTRING`, `BINBYTES`, `SHORT_BINBYTES`, `BINBYTES8`, `EMPTY_TUPLE`, `TUPLE`,
/// `TUPLE1`–`3`, `EMPTY_LIST`, `LIST`, `APPEND`, `APPENDS`, `EMPTY_DICT`, `DICT`, `SETITEM`,
/// `SETITEMS`, `REDUCE`, `BUILD` and `BINPERSID`. Objects are made only through the machine.
pub(crate) fn load<M: Machine>(data: &[u8], machine: &mut M) -> PResult<(Value<M::Object>, usize)> {
    let mut input = Input { data, pos: 0 };
    let mut vm = Vm { machine, stack: Vec::new(), marks: Vec::new(), memo: HashMap::new() };
    let value = vm.run(&mut input)?;
    Ok((value, input.pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine that knows one global, `m.f`, whose call returns its arguments as a list, and
    /// turns persistent ids into their tuple's first item.
    struct Echo;

    impl Machine for Echo {
        type Object = &'static str;
        fn find_class(&mut self, module: &str, name: &str) -> PResult<&'static str> {
            match (module, name) {
                ("m", "f") => Ok("m.f"),
                _ => Err(ReadError::unsupported(format!("{module}.{name}"))),
            }
        }
        fn persistent_load(&mut self, pid: Value<&'static str>) -> PResult<Value<&'static str>> {
            match pid {
                Value::Tuple(t) => Ok(t.items().swap_remove(0)),
                _ => Err(ReadError::corrupt("pid")),
            }
        }
        fn reduce(&mut self, _: &'static str, args: Vec<Value<&'static str>>) -> PResult<Value<&'static str>> {
            Ok(Value::List(Rc::new(Seq(RefCell::new(args)))))
        }
        fn build(&mut self, obj: Value<&'static str>, _: Value<&'static str>) -> PResult<Value<&'static str>> {
            Ok(obj)
        }
    }

    fn run(data: &[u8]) -> PResult<(Value<&'static str>, usize)> {
        load(data, &mut Echo)
    }

    fn err(data: &[u8]) -> String {
        match run(data) {
            Ok(_) => panic!("{data:?} should fail"),
            Err(e) => e.message,
        }
    }

    fn int(v: &Value<&'static str>) -> i128 {
        match v {
            Value::Int(i) => *i,
            other => panic!("an int, not a {}", other.type_name()),
        }
    }

    #[test]
    fn reads_every_scalar_opcode() {
        let mut p = vec![0x80, 2, b'('];
        p.extend([b'J', 0xfe, 0xff, 0xff, 0xff]); // BININT -2
        p.extend([b'K', 200]); // BININT1
        p.extend([b'M', 0x34, 0x12]); // BININT2
        p.extend([0x8a, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19]); // LONG1: torch's magic
        p.extend([0x8a, 1, 0xff]); // LONG1 -1
        p.extend([0x8b, 2, 0, 0, 0, 0x00, 0x80]); // LONG4 -32768
        p.push(b'G');
        p.extend(0.25f64.to_be_bytes()); // BINFLOAT
        p.extend([b'X', 2, 0, 0, 0, 0xc3, 0xa9]); // BINUNICODE "é"
        p.extend([0x8c, 1, b'a', 0x8d, 1, 0, 0, 0, 0, 0, 0, 0, b'b']); // SHORT_BINUNICODE, BINUNICODE8
        p.extend([b'T', 1, 0, 0, 0, b'c', b'U', 1, b'd']); // BINSTRING, SHORT_BINSTRING
        p.extend([b'B', 1, 0, 0, 0, 7, b'C', 1, 8, 0x8e, 1, 0, 0, 0, 0, 0, 0, 0, 9]); // BINBYTES, SHORT_, 8
        p.extend([b'N', 0x88, 0x89, b't', b'.']);
        let (v, used) = run(&p).unwrap();
        assert_eq!(used, p.len());
        let Value::Tuple(t) = v else { panic!("a tuple") };
        let items = t.items();
        let ints: Vec<i128> = items[..6].iter().map(int).collect();
        assert_eq!(ints, [-2, 200, 0x1234, 0x1950a86a20f9469cfc6c, -1, -32768]);
        assert!(matches!(items[6], Value::Float(x) if x == 0.25));
        let strs: Vec<String> =
            items[7..12].iter().map(|v| if let Value::Str(s) = v { s.to_string() } else { panic!() }).collect();
        assert_eq!(strs, ["é", "a", "b", "c", "d"]);
        assert!(items[12..15].iter().all(|v| matches!(v, Value::Bytes)));
        assert!(matches!(items[15..], [Value::None, Value::Bool(true), Value::Bool(false)]));
    }

    #[test]
    fn builds_shared_containers_through_the_memo() {
        // d = {}; d["k"] = l = [1]; l.append(2) after l was memoized; (d, l, m.f(1, 2))
        let p = [
            0x80, 4, 0x95, 0, 0, 0, 0, 0, 0, 0, 0, // PROTO 4, FRAME
            b'}', b'q', 0, // EMPTY_DICT, BINPUT 0
            0x8c, 1, b'k', // "k"
            b']', b'r', 1, 0, 0, 0, // EMPTY_LIST, LONG_BINPUT 1
            b'K', 1, b'a', // APPEND 1
            b's', // SETITEM
            b'0', // POP the dict
            b'j', 1, 0, 0, 0, b'K', 2, b'a', // LONG_BINGET 1, APPEND 2
            b'0', // POP it
            b'h', 0, b'h', 1, // BINGET 0, BINGET 1
            0x8c, 1, b'm', 0x8c, 1, b'f', 0x93, 0x94, // STACK_GLOBAL m.f, MEMOIZE
            b'K', 1, b'K', 2, 0x86, b'R', // m.f(1, 2)
            0x87, b'.', // TUPLE3, STOP
        ];
        let (v, _) = run(&p).unwrap();
        let Value::Tuple(t) = v else { panic!("a tuple") };
        let items = t.items();
        let Value::Dict(d) = &items[0] else { panic!("a dict") };
        let entries = d.items();
        assert_eq!(entries[0].0, Key::Str("k".into()));
        let Value::List(l) = &entries[0].1 else { panic!("a list") };
        assert_eq!(l.items().iter().map(int).collect::<Vec<_>>(), [1, 2], "the memo shares the list");
        let Value::List(called) = &items[2] else { panic!("the call's result") };
        assert_eq!(called.items().iter().map(int).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn dicts_keep_insertion_order_and_replace_in_place() {
        // {"b": 1, "a": 2, "b": 3} through DICT, then SETITEMS 5: 4
        let p = [
            b'(', 0x8c, 1, b'b', b'K', 1, 0x8c, 1, b'a', b'K', 2, 0x8c, 1, b'b', b'K', 3, b'd', b'(', b'K', 5, b'K', 4,
            b'u', b'.',
        ];
        let (Value::Dict(d), _) = run(&p).unwrap() else { panic!("a dict") };
        let entries: Vec<(String, i128)> = d.items().iter().map(|(k, v)| (k.to_string(), int(v))).collect();
        assert_eq!(entries, [("b".to_string(), 3), ("a".to_string(), 2), ("5".to_string(), 4)]);
    }

    #[test]
    fn persistent_ids_and_build_go_to_the_machine() {
        let p = [b'K', 7, 0x85, b'Q', b'N', b'b', b'.'];
        let (v, _) = run(&p).unwrap();
        assert_eq!(int(&v), 7);
    }

    #[test]
    fn reports_only_the_bytes_of_its_pickle() {
        let (v, used) = run(b"K\x05.K\x06.").unwrap();
        assert_eq!((int(&v), used), (5, 3));
    }

    #[test]
    fn malformed_pickles_are_errors_not_panics() {
        assert!(err(b"").contains("cut short"));
        assert!(err(b"X\xff\xff\xff\xff").contains("needs 4294967295 bytes at byte 5 but has 0 left"));
        assert!(err(b"\x8d\xff\xff\xff\xff\xff\xff\xff\xff").contains("cut short"));
        assert!(err(b"T\xff\xff\xff\xff").contains("negative length -1"));
        assert!(err(b"\x8b\x20\x00\x00\x00").contains("cut short"));
        assert!(err(&[&[0x8b, 17, 0, 0, 0][..], &[0; 17]].concat()).contains("integer of 17 bytes is too large"));
        assert!(err(b".").contains("pops a value"));
        assert!(err(b"(.").contains("pops a value"));
        assert!(err(b"t").contains("MARK"));
        assert!(err(b"h\x03").contains("memo entry 3, never set"));
        assert!(err(b"K\x01K\x02a").contains("APPEND to a int"));
        assert!(err(b"}K\x01s").contains("needs a value"));
        assert!(err(b"}]K\x01s").contains("key of type list"));
        assert!(err(b"(K\x01d").contains("a key but no value"));
        assert!(err(b"K\x01)R").contains("calls a int"));
        assert!(err(b"cm\nf\nK\x01R").contains("with a int of arguments"));
        assert!(err(b"cm\nf").contains("no end of line"));
        assert!(err(b"cos\nsystem\n").contains("os.system"));
        assert!(err(b"K\x01K\x02\x93").contains("needs two strings"));
        assert!(err(b"X\x01\x00\x00\x00\xff").contains("not UTF-8"));
        assert!(err(b"\x80\x06").contains("protocol 6"));
        assert!(err(b"\x81").contains("opcode 0x81 at byte 0"));
        assert!(err(b"q\x00").contains("needs a value"));
    }

    #[test]
    fn stack_and_memo_are_capped() {
        let pushes = vec![b'N'; MAX_STACK + 1];
        assert!(err(&pushes).contains("stack grows past"));
        let mut p = vec![b'N'];
        for i in 0..=MAX_MEMO as u32 {
            p.push(b'r');
            p.extend(i.to_le_bytes());
        }
        assert!(err(&p).contains("memo grows past"));
    }

    #[test]
    fn deeply_nested_lists_drop_without_recursion() {
        // Each list appended into the one before it, through the memo: a chain a million deep.
        let depth = 1_000_000u32;
        let mut p = vec![b']', b'r', 0, 0, 0, 0];
        for i in 1..depth {
            p.push(b'j');
            p.extend((i - 1).to_le_bytes());
            p.extend([b']', b'r']);
            p.extend(i.to_le_bytes());
            p.extend([b'a', b'0']);
        }
        p.extend([b'j', 0, 0, 0, 0, b'.']);
        let (v, _) = run(&p).unwrap();
        drop(v);
    }
}
