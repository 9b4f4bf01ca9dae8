//! The comparison and logical op tables: one row per op, each returning a Bool tensor. The
//! enums, `ALL`, names, scalar formulas (the row's Rust operator), the `Tensor` methods and
//! the monomorphized CPU dispatch are generated from them; the Cranelift condition codes and
//! the CUDA C operators stay exhaustive `match`es in the code generator.

/// The table of comparisons, handed to the macro `$then`, one row per op:
///
/// `Variant "torch_name" (operator) [method try_method] "doc";`
///
/// The operator is Rust's on `PartialOrd` values, so NaN follows IEEE rules (only `!=` is
/// true), as PyTorch's comparisons do.
#[macro_export]
macro_rules! cmp_op_table {
    ($then:ident $(, $($args:tt)*)?) => {
        $then! {
            $(($($args)*))?
            Eq "eq" (==) [eq try_eq] "`a == b`";
            Ne "ne" (!=) [ne try_ne] "`a != b`";
            Lt "lt" (<)  [lt try_lt] "`a < b`";
            Le "le" (<=) [le try_le] "`a <= b`";
            Gt "gt" (>)  [gt try_gt] "`a > b`";
            Ge "ge" (>=) [ge try_ge] "`a >= b`";
        }
    };
}

/// The table of logical ops of two operands, on their truth (non-zero is true), handed to the
/// macro `$then`, one row per op:
///
/// `Variant "torch_name" (operator) [method] "doc";`
#[macro_export]
macro_rules! logical_op_table {
    ($then:ident $(, $($args:tt)*)?) => {
        $then! {
            $(($($args)*))?
            And "logical_and" (&&) [logical_and] "and";
            Or  "logical_or"  (||) [logical_or]  "or";
            Xor "logical_xor" (!=) [logical_xor] "exclusive or";
        }
    };
}

/// Defines a Bool-valued op family from its table: the enum, `ALL`, `name`, `from_name` and
/// `eval` (whose operands are `$t`, with generic parameters `[$gen]`).
macro_rules! define_bool_op {
    (($enum:ident $family:literal [$($gen:tt)*] $t:ty) $($v:ident $name:literal ($op:tt) [$($m:ident)*] $doc:literal;)*) => {
        #[doc = concat!($family, "; each returns a Bool tensor.")]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $enum {
            $(#[doc = $doc] $v,)*
        }

        impl $enum {
            /// Every row of the table, in table order.
            pub const ALL: &'static [$enum] = &[$($enum::$v),*];

            /// The op's name as PyTorch spells it.
            pub fn name(self) -> &'static str {
                match self {
                    $($enum::$v => $name,)*
                }
            }

            /// The op's name as PyTorch spells it back to the op.
            pub fn from_name(name: &str) -> Option<$enum> {
                Self::ALL.iter().copied().find(|op| op.name() == name)
            }

            /// The op on two values.
            #[inline(always)]
            pub fn eval<$($gen)*>(self, a: $t, b: $t) -> bool {
                match self {
                    $($enum::$v => a $op b,)*
                }
            }
        }
    };
}

cmp_op_table!(define_bool_op, CmpOp "Comparisons (IEEE semantics for NaN: only `Ne` is true)" [T: PartialOrd] T);
logical_op_table!(define_bool_op, LogicalOp "Logical ops on the truth of their operands (non-zero is true)" [] bool);
