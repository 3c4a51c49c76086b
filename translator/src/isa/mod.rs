//! The PTX instruction set as data: every instruction of the PTX ISA
//! (chapter 9 of NVIDIA's manual, up to PTX ISA 9.x) with the syntax lines
//! the manual gives for it, its modifiers as enums, its operands, and the
//! special registers.
//!
//! - `ptx.isa`: the table, transcribed from the manual (the format is
//!   described at its top). It is the single source of truth.
//! - [`names`]: the [`Opcode`], [`Mod`] and [`Group`] enums, generated from
//!   the table by [`gen`] and checked in (a test fails when they are stale).
//! - [`raw`] reads the table text; [`mod@table`] types it ([`table::table`] is
//!   built once per process).
//! - [`mod@decode`] turns an [`ast::Instruction`](crate::ast::Instruction)
//!   into a [`Decoded`] form or a diagnostic.
//! - [`sreg`]: special registers.

pub mod decode;
pub mod gen;
#[rustfmt::skip]
pub mod names;
pub mod raw;
pub mod sreg;
pub mod table;

pub use decode::{decode, Decoded};
pub use names::{Group, Mod, Opcode};
pub use sreg::SpecialRegister;
pub use table::{table, Form, Table};
