//! A SPIR-V module writer: instructions go straight into word vectors, one
//! per module section, and function bodies into one vector per function.
//!
//! The emitter used rspirv's `dr::Builder`, which builds an instruction
//! tree (an `Instruction` with an operand `Vec` per SPIR-V instruction) and
//! assembles it at the end: on large inputs the allocations, the assembly
//! and the dropping of the tree were a third of the translation. This
//! writer has the method names and argument lists of the `dr::Builder`
//! methods the emitter calls, the same id allocation order (ids come from
//! [`Builder::id`], types are de-duplicated the same way), and produces the
//! same words as `Builder::module().assemble()` did.
//!
//! Structure rules kept from the tree builder (violations are
//! [`Error`]s, reported by the emitter as internal errors): instructions go
//! into the selected block, which must be the function's last one (or the
//! entry block for [`Builder::insert_entry_begin`]); a terminator closes the
//! block; blocks and parameters need an open function.

use crate::fxhash::FxHashMap;
use rspirv::binary::Assemble;
use rspirv::dr::{Error, Operand};
use rspirv::spirv::{self, Op, Word};

type BuildResult<T> = Result<T, Error>;

/// The first word of an instruction of `len` words.
#[inline]
fn head(op: Op, len: usize) -> u32 {
    ((len as u32) << 16) | op as u32
}

/// A literal string: UTF-8, NUL-terminated, padded with NULs to a word.
fn push_str(out: &mut Vec<u32>, s: &str) {
    let bytes = s.as_bytes();
    let mut chunks = bytes.chunks_exact(4);
    for c in &mut chunks {
        out.push(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    let mut last = [0u8; 4];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    out.push(u32::from_le_bytes(last));
}

/// Words appended to `out` since `start` become one instruction: patch its
/// word count into the first word.
#[inline]
fn finish(out: &mut [u32], start: usize) {
    let len = (out.len() - start) as u32;
    out[start] |= len << 16;
}

/// The module being written.
pub(crate) struct Builder {
    /// SPIR-V version word.
    version: u32,
    next_id: Word,
    capabilities: Vec<u32>,
    extensions: Vec<u32>,
    ext_inst_imports: Vec<u32>,
    memory_model: Vec<u32>,
    entry_points: Vec<u32>,
    execution_modes: Vec<u32>,
    annotations: Vec<u32>,
    /// Types, constants and module-scope variables.
    globals: Vec<u32>,
    /// Finished functions.
    functions: Vec<u32>,
    /// Type instructions without their result id (opcode and operands) →
    /// the id, for de-duplication.
    types: FxHashMap<Vec<u32>, Word>,
    /// Whether a function is open.
    in_function: bool,
    /// `OpFunction` and the `OpFunctionParameter`s of the open function.
    func_head: Vec<u32>,
    /// The blocks of the open function, one after another.
    body: Vec<u32>,
    /// Where the entry block's first instruction goes in `body` (after its `OpLabel`).
    entry_start: usize,
    /// Instructions inserted at the beginning of the entry block, in order.
    entry_prefix: Vec<u32>,
    /// Instructions placed in the entry block after all its variables and
    /// before everything else appended to it, in insertion order (see
    /// [`Builder::entry_value`]).
    entry_values: Vec<u32>,
    /// Counts the functions begun: tells a cache of entry values (see
    /// [`Builder::entry_value`]) which function it belongs to.
    function_serial: u64,
    /// Labels of the open function's blocks.
    labels: Vec<Word>,
    selected_block: Option<usize>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            version: (1 << 16) | (6 << 8),
            next_id: 1,
            capabilities: Vec::new(),
            extensions: Vec::new(),
            ext_inst_imports: Vec::new(),
            memory_model: Vec::new(),
            entry_points: Vec::new(),
            execution_modes: Vec::new(),
            annotations: Vec::new(),
            globals: Vec::new(),
            functions: Vec::new(),
            types: FxHashMap::default(),
            in_function: false,
            func_head: Vec::new(),
            body: Vec::new(),
            entry_start: 0,
            entry_prefix: Vec::new(),
            entry_values: Vec::new(),
            function_serial: 0,
            labels: Vec::new(),
            selected_block: None,
        }
    }

    pub fn set_version(&mut self, major: u8, minor: u8) {
        self.version = ((major as u32) << 16) | ((minor as u32) << 8);
    }

    /// The next unused id.
    #[inline]
    pub fn id(&mut self) -> Word {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// The module's words (header, sections in the order of the SPIR-V
    /// logical layout, functions). The functions' words are moved into the
    /// result (the largest part, not copied to a new vector); the builder
    /// keeps the other sections.
    pub fn assemble(&mut self) -> Vec<u32> {
        let sections = [
            &self.capabilities,
            &self.extensions,
            &self.ext_inst_imports,
            &self.memory_model,
            &self.entry_points,
            &self.execution_modes,
            &self.annotations,
            &self.globals,
        ];
        let mut head = Vec::with_capacity(5 + sections.iter().map(|s| s.len()).sum::<usize>());
        // Magic, version, generator (rspirv's registered tool id, kept so
        // that the output is unchanged), bound, schema.
        head.extend([spirv::MAGIC_NUMBER, self.version, 0x000f_0000, self.next_id, 0]);
        for s in sections {
            head.extend_from_slice(s);
        }
        let mut out = std::mem::take(&mut self.functions);
        out.splice(0..0, head);
        out
    }

    // ---- blocks and functions ----

    pub fn selected_block(&self) -> Option<usize> {
        self.selected_block
    }

    /// The label of the selected block.
    pub fn selected_label(&self) -> Option<Word> {
        self.selected_block.and_then(|i| self.labels.get(i).copied())
    }

    pub fn select_block(&mut self, idx: Option<usize>) -> BuildResult<()> {
        match idx {
            Some(_) if !self.in_function => Err(Error::DetachedBlock),
            Some(i) if i >= self.labels.len() => Err(Error::BlockNotFound),
            _ => {
                self.selected_block = idx;
                Ok(())
            }
        }
    }

    pub fn begin_function(
        &mut self,
        return_type: Word,
        function_id: Option<Word>,
        control: spirv::FunctionControl,
        function_type: Word,
    ) -> BuildResult<Word> {
        if self.in_function {
            return Err(Error::NestedFunction);
        }
        let id = function_id.unwrap_or_else(|| self.id());
        self.in_function = true;
        self.func_head.clear();
        self.body.clear();
        self.entry_prefix.clear();
        self.entry_values.clear();
        self.function_serial += 1;
        self.labels.clear();
        self.entry_start = 0;
        self.func_head.extend([head(Op::Function, 5), return_type, id, control.bits(), function_type]);
        Ok(id)
    }

    pub fn function_parameter(&mut self, result_type: Word) -> BuildResult<Word> {
        if !self.in_function {
            return Err(Error::DetachedFunctionParameter);
        }
        let id = self.id();
        self.func_head.extend([head(Op::FunctionParameter, 3), result_type, id]);
        Ok(id)
    }

    /// Close the open function and append it to the module. (As with
    /// rspirv's builder, a block left open stays selected.)
    pub fn end_function(&mut self) -> BuildResult<()> {
        if !self.in_function {
            return Err(Error::MismatchedFunctionEnd);
        }
        self.in_function = false;
        let f = &mut self.functions;
        f.reserve(self.func_head.len() + self.body.len() + self.entry_prefix.len() + self.entry_values.len() + 1);
        f.extend_from_slice(&self.func_head);
        f.extend_from_slice(&self.body[..self.entry_start]);
        f.extend_from_slice(&self.entry_prefix);
        // The entry values go after the variables the entry block begins
        // with (SPIR-V wants every `OpVariable` of a function first).
        let mut at = self.entry_start;
        while at < self.body.len() && self.body[at] & 0xffff == Op::Variable as u32 {
            let n = (self.body[at] >> 16) as usize;
            if n == 0 {
                break;
            }
            at += n;
        }
        let at = at.min(self.body.len());
        f.extend_from_slice(&self.body[self.entry_start..at]);
        f.extend_from_slice(&self.entry_values);
        f.extend_from_slice(&self.body[at..]);
        f.push(head(Op::FunctionEnd, 1));
        Ok(())
    }

    pub fn begin_block(&mut self, label_id: Option<Word>) -> BuildResult<Word> {
        if !self.in_function {
            return Err(Error::DetachedBlock);
        }
        if self.selected_block.is_some() {
            return Err(Error::NestedBlock);
        }
        let id = label_id.unwrap_or_else(|| self.id());
        self.body.extend([head(Op::Label, 2), id]);
        if self.labels.is_empty() {
            self.entry_start = self.body.len();
        }
        self.labels.push(id);
        self.selected_block = Some(self.labels.len() - 1);
        Ok(id)
    }

    /// Instructions may be appended: the selected block is the last one.
    #[inline]
    fn at_end(&self) -> BuildResult<()> {
        match self.selected_block {
            Some(b) if b + 1 == self.labels.len() => Ok(()),
            _ => Err(Error::DetachedInstruction(None)),
        }
    }

    /// Insert an instruction (its words) at the beginning of the entry
    /// block, which must be selected: instructions inserted this way come
    /// out in the reverse order of their insertion, before everything
    /// appended to the block.
    pub fn insert_entry_begin(&mut self, words: &[u32]) -> BuildResult<()> {
        if self.selected_block != Some(0) {
            return Err(Error::DetachedInstruction(None));
        }
        self.entry_prefix.splice(0..0, words.iter().copied());
        Ok(())
    }

    /// Place an instruction with a result type and id operands (as
    /// [`Builder::op`]) in the entry block of the open function, after its
    /// variables and before everything else appended to it, so that its
    /// result dominates every block of the function. Its operands must be
    /// module-level ids or earlier entry values. Returns the result id.
    pub fn entry_value(&mut self, op: Op, result_type: Word, args: &[Word]) -> BuildResult<Word> {
        if !self.in_function || self.labels.is_empty() {
            return Err(Error::DetachedInstruction(None));
        }
        let id = self.id();
        self.entry_values.extend([head(op, 3 + args.len()), result_type, id]);
        self.entry_values.extend_from_slice(args);
        Ok(id)
    }

    /// Which function is open: a number no other function of this builder
    /// had (for caches of [`Builder::entry_value`] results).
    pub fn function_serial(&self) -> u64 {
        self.function_serial
    }

    /// A `Function` variable at the beginning of the entry block (see
    /// [`Builder::insert_entry_begin`]; the selected block is kept).
    pub fn entry_variable(&mut self, pointer_type: Word, initializer: Option<Word>) -> BuildResult<Word> {
        let id = self.id();
        let sc = spirv::StorageClass::Function as u32;
        let here = self.selected_block;
        self.select_block(Some(0))?;
        let r = match initializer {
            Some(init) => self.insert_entry_begin(&[head(Op::Variable, 5), pointer_type, id, sc, init]),
            None => self.insert_entry_begin(&[head(Op::Variable, 4), pointer_type, id, sc]),
        };
        self.select_block(here)?;
        r.map(|()| id)
    }

    /// Append an instruction with a result type and id and id operands to
    /// the selected block.
    #[inline]
    pub fn op(&mut self, op: Op, result_type: Word, result_id: Option<Word>, args: &[Word]) -> BuildResult<Word> {
        let id = result_id.unwrap_or_else(|| self.id());
        self.at_end()?;
        let b = &mut self.body;
        b.reserve(3 + args.len());
        b.push(head(op, 3 + args.len()));
        b.push(result_type);
        b.push(id);
        b.extend_from_slice(args);
        Ok(id)
    }

    /// Append an instruction without result to the selected block.
    #[inline]
    fn op_void(&mut self, op: Op, args: &[Word]) -> BuildResult<()> {
        self.at_end()?;
        let b = &mut self.body;
        b.reserve(1 + args.len());
        b.push(head(op, 1 + args.len()));
        b.extend_from_slice(args);
        Ok(())
    }

    /// Append a terminator and close the block.
    fn terminator(&mut self, op: Op, args: &[Word]) -> BuildResult<()> {
        if self.selected_block.is_none() {
            return Err(Error::MismatchedTerminator);
        }
        self.op_void(op, args)?;
        self.selected_block = None;
        Ok(())
    }

    /// Append `operands` to the instruction begun at `start` (its first word
    /// `head(op, 0)`) and patch its word count.
    fn with_operands(&mut self, start: usize, operands: impl IntoIterator<Item = Operand>) {
        for o in operands {
            o.assemble_into(&mut self.body);
        }
        finish(&mut self.body, start);
    }

    // ---- terminators and structured control flow ----

    pub fn branch(&mut self, target_label: Word) -> BuildResult<()> {
        self.terminator(Op::Branch, &[target_label])
    }

    pub fn branch_conditional(
        &mut self,
        condition: Word,
        true_label: Word,
        false_label: Word,
        branch_weights: impl IntoIterator<Item = u32>,
    ) -> BuildResult<()> {
        if self.selected_block.is_none() {
            return Err(Error::MismatchedTerminator);
        }
        self.at_end()?;
        let start = self.body.len();
        self.body.extend([head(Op::BranchConditional, 0), condition, true_label, false_label]);
        self.body.extend(branch_weights);
        finish(&mut self.body, start);
        self.selected_block = None;
        Ok(())
    }

    pub fn ret(&mut self) -> BuildResult<()> {
        self.terminator(Op::Return, &[])
    }

    pub fn ret_value(&mut self, value: Word) -> BuildResult<()> {
        self.terminator(Op::ReturnValue, &[value])
    }

    pub fn unreachable(&mut self) -> BuildResult<()> {
        self.terminator(Op::Unreachable, &[])
    }

    pub fn selection_merge(&mut self, merge_block: Word, control: spirv::SelectionControl) -> BuildResult<()> {
        self.op_void(Op::SelectionMerge, &[merge_block, control.bits()])
    }

    pub fn loop_merge(
        &mut self,
        merge_block: Word,
        continue_target: Word,
        control: spirv::LoopControl,
        additional_params: impl IntoIterator<Item = Operand>,
    ) -> BuildResult<()> {
        self.at_end()?;
        let start = self.body.len();
        self.body.extend([head(Op::LoopMerge, 0), merge_block, continue_target, control.bits()]);
        self.with_operands(start, additional_params);
        Ok(())
    }

    // ---- instructions with operand lists ----

    pub fn load(
        &mut self,
        result_type: Word,
        result_id: Option<Word>,
        pointer: Word,
        memory_access: Option<spirv::MemoryAccess>,
        additional_params: impl IntoIterator<Item = Operand>,
    ) -> BuildResult<Word> {
        let id = result_id.unwrap_or_else(|| self.id());
        self.at_end()?;
        let start = self.body.len();
        self.body.extend([head(Op::Load, 0), result_type, id, pointer]);
        if let Some(m) = memory_access {
            self.body.push(m.bits());
        }
        self.with_operands(start, additional_params);
        Ok(id)
    }

    pub fn store(
        &mut self,
        pointer: Word,
        object: Word,
        memory_access: Option<spirv::MemoryAccess>,
        additional_params: impl IntoIterator<Item = Operand>,
    ) -> BuildResult<()> {
        self.at_end()?;
        let start = self.body.len();
        self.body.extend([head(Op::Store, 0), pointer, object]);
        if let Some(m) = memory_access {
            self.body.push(m.bits());
        }
        self.with_operands(start, additional_params);
        Ok(())
    }

    pub fn ext_inst(
        &mut self,
        result_type: Word,
        result_id: Option<Word>,
        extension_set: Word,
        instruction: Word,
        operands: impl IntoIterator<Item = Operand>,
    ) -> BuildResult<Word> {
        let id = result_id.unwrap_or_else(|| self.id());
        self.at_end()?;
        let start = self.body.len();
        self.body.extend([head(Op::ExtInst, 0), result_type, id, extension_set, instruction]);
        self.with_operands(start, operands);
        Ok(id)
    }

    /// `OpExtInst` with id operands.
    pub fn ext_inst_ids(
        &mut self,
        result_type: Word,
        extension_set: Word,
        instruction: Word,
        args: &[Word],
    ) -> BuildResult<Word> {
        let id = self.id();
        self.at_end()?;
        let start = self.body.len();
        self.body.extend([head(Op::ExtInst, 0), result_type, id, extension_set, instruction]);
        self.body.extend_from_slice(args);
        finish(&mut self.body, start);
        Ok(id)
    }

    /// An instruction with a result and a variable number of id operands
    /// after the fixed ones.
    fn op_list(
        &mut self,
        op: Op,
        result_type: Word,
        result_id: Option<Word>,
        fixed: &[Word],
        rest: impl IntoIterator<Item = Word>,
    ) -> BuildResult<Word> {
        let id = result_id.unwrap_or_else(|| self.id());
        self.at_end()?;
        let start = self.body.len();
        self.body.extend([head(op, 0), result_type, id]);
        self.body.extend_from_slice(fixed);
        self.body.extend(rest);
        finish(&mut self.body, start);
        Ok(id)
    }

    pub fn access_chain(
        &mut self,
        result_type: Word,
        result_id: Option<Word>,
        base: Word,
        indexes: impl IntoIterator<Item = Word>,
    ) -> BuildResult<Word> {
        self.op_list(Op::AccessChain, result_type, result_id, &[base], indexes)
    }

    pub fn composite_construct(
        &mut self,
        result_type: Word,
        result_id: Option<Word>,
        constituents: impl IntoIterator<Item = Word>,
    ) -> BuildResult<Word> {
        self.op_list(Op::CompositeConstruct, result_type, result_id, &[], constituents)
    }

    pub fn composite_extract(
        &mut self,
        result_type: Word,
        result_id: Option<Word>,
        composite: Word,
        indexes: impl IntoIterator<Item = u32>,
    ) -> BuildResult<Word> {
        self.op_list(Op::CompositeExtract, result_type, result_id, &[composite], indexes)
    }

    pub fn function_call(
        &mut self,
        result_type: Word,
        result_id: Option<Word>,
        function: Word,
        arguments: impl IntoIterator<Item = Word>,
    ) -> BuildResult<Word> {
        self.op_list(Op::FunctionCall, result_type, result_id, &[function], arguments)
    }

    pub fn phi(
        &mut self,
        result_type: Word,
        result_id: Option<Word>,
        variable_parent: impl IntoIterator<Item = (Word, Word)>,
    ) -> BuildResult<Word> {
        self.op_list(Op::Phi, result_type, result_id, &[], variable_parent.into_iter().flat_map(|(v, p)| [v, p]))
    }

    // ---- instructions without result ----

    pub fn atomic_store(&mut self, pointer: Word, memory: Word, semantics: Word, value: Word) -> BuildResult<()> {
        self.op_void(Op::AtomicStore, &[pointer, memory, semantics, value])
    }

    pub fn control_barrier(&mut self, execution: Word, memory: Word, semantics: Word) -> BuildResult<()> {
        self.op_void(Op::ControlBarrier, &[execution, memory, semantics])
    }

    pub fn memory_barrier(&mut self, memory: Word, semantics: Word) -> BuildResult<()> {
        self.op_void(Op::MemoryBarrier, &[memory, semantics])
    }

    // ---- variables ----

    /// `OpVariable`: in the selected block, or at module scope when no block is selected.
    pub fn variable(
        &mut self,
        result_type: Word,
        result_id: Option<Word>,
        storage_class: spirv::StorageClass,
        initializer: Option<Word>,
    ) -> Word {
        let id = result_id.unwrap_or_else(|| self.id());
        debug_assert!(self.selected_block.is_none() || self.at_end().is_ok());
        let out = if self.in_function && self.selected_block.is_some() { &mut self.body } else { &mut self.globals };
        match initializer {
            Some(init) => out.extend([head(Op::Variable, 5), result_type, id, storage_class as u32, init]),
            None => out.extend([head(Op::Variable, 4), result_type, id, storage_class as u32]),
        }
        id
    }

    // ---- module-level instructions ----

    pub fn capability(&mut self, capability: spirv::Capability) {
        self.capabilities.extend([head(Op::Capability, 2), capability as u32]);
    }

    pub fn extension(&mut self, extension: &str) {
        let start = self.extensions.len();
        self.extensions.push(head(Op::Extension, 0));
        push_str(&mut self.extensions, extension);
        finish(&mut self.extensions, start);
    }

    pub fn ext_inst_import(&mut self, set: &str) -> Word {
        let id = self.id();
        let start = self.ext_inst_imports.len();
        self.ext_inst_imports.extend([head(Op::ExtInstImport, 0), id]);
        push_str(&mut self.ext_inst_imports, set);
        finish(&mut self.ext_inst_imports, start);
        id
    }

    pub fn memory_model(&mut self, addressing: spirv::AddressingModel, memory: spirv::MemoryModel) {
        self.memory_model.clear();
        self.memory_model.extend([head(Op::MemoryModel, 3), addressing as u32, memory as u32]);
    }

    pub fn entry_point(
        &mut self,
        execution_model: spirv::ExecutionModel,
        entry_point: Word,
        name: &str,
        interface: impl AsRef<[Word]>,
    ) {
        let out = &mut self.entry_points;
        let start = out.len();
        out.extend([head(Op::EntryPoint, 0), execution_model as u32, entry_point]);
        push_str(out, name);
        out.extend_from_slice(interface.as_ref());
        finish(out, start);
    }

    pub fn execution_mode(&mut self, entry_point: Word, mode: spirv::ExecutionMode, params: impl AsRef<[u32]>) {
        let out = &mut self.execution_modes;
        let start = out.len();
        out.extend([head(Op::ExecutionMode, 0), entry_point, mode as u32]);
        out.extend_from_slice(params.as_ref());
        finish(out, start);
    }

    pub fn decorate(
        &mut self,
        target: Word,
        decoration: spirv::Decoration,
        additional_params: impl IntoIterator<Item = Operand>,
    ) {
        let out = &mut self.annotations;
        let start = out.len();
        out.extend([head(Op::Decorate, 0), target, decoration as u32]);
        for o in additional_params {
            o.assemble_into(out);
        }
        finish(out, start);
    }

    pub fn member_decorate(
        &mut self,
        structure_type: Word,
        member: u32,
        decoration: spirv::Decoration,
        additional_params: impl IntoIterator<Item = Operand>,
    ) {
        let out = &mut self.annotations;
        let start = out.len();
        out.extend([head(Op::MemberDecorate, 0), structure_type, member, decoration as u32]);
        for o in additional_params {
            o.assemble_into(out);
        }
        finish(out, start);
    }

    // ---- types (de-duplicated) ----

    /// A type instruction with operands `ops`: the existing id of an
    /// identical one, else a new one.
    fn ty(&mut self, op: Op, ops: &[Word]) -> Word {
        let mut key = Vec::with_capacity(1 + ops.len());
        key.push(op as u32);
        key.extend_from_slice(ops);
        if let Some(&id) = self.types.get(&key) {
            return id;
        }
        let id = self.id();
        self.globals.push(head(op, 2 + ops.len()));
        self.globals.push(id);
        self.globals.extend_from_slice(ops);
        self.types.insert(key, id);
        id
    }

    pub fn type_void(&mut self) -> Word {
        self.ty(Op::TypeVoid, &[])
    }

    pub fn type_bool(&mut self) -> Word {
        self.ty(Op::TypeBool, &[])
    }

    pub fn type_int(&mut self, width: u32, signedness: u32) -> Word {
        self.ty(Op::TypeInt, &[width, signedness])
    }

    pub fn type_float(&mut self, width: u32, encoding: Option<spirv::FPEncoding>) -> Word {
        match encoding {
            Some(e) => self.ty(Op::TypeFloat, &[width, e as u32]),
            None => self.ty(Op::TypeFloat, &[width]),
        }
    }

    pub fn type_vector(&mut self, component_type: Word, count: u32) -> Word {
        self.ty(Op::TypeVector, &[component_type, count])
    }

    pub fn type_array(&mut self, element_type: Word, length: Word) -> Word {
        self.ty(Op::TypeArray, &[element_type, length])
    }

    /// `OpTypePointer` (`result_id`: an explicit id, never de-duplicated).
    pub fn type_pointer(&mut self, result_id: Option<Word>, storage_class: spirv::StorageClass, pointee: Word) -> Word {
        match result_id {
            Some(id) => {
                self.globals.extend([head(Op::TypePointer, 4), id, storage_class as u32, pointee]);
                self.types.entry(vec![Op::TypePointer as u32, storage_class as u32, pointee]).or_insert(id);
                id
            }
            None => self.ty(Op::TypePointer, &[storage_class as u32, pointee]),
        }
    }

    pub fn type_function(&mut self, return_type: Word, params: impl IntoIterator<Item = Word>) -> Word {
        let mut ops = vec![return_type];
        ops.extend(params);
        self.ty(Op::TypeFunction, &ops)
    }

    pub fn type_struct(&mut self, members: impl IntoIterator<Item = Word>) -> Word {
        let ops: Vec<Word> = members.into_iter().collect();
        self.ty(Op::TypeStruct, &ops)
    }

    // ---- constants ----

    fn global(&mut self, op: Op, result_type: Word, values: &[u32]) -> Word {
        let id = self.id();
        self.globals.push(head(op, 3 + values.len()));
        self.globals.push(result_type);
        self.globals.push(id);
        self.globals.extend_from_slice(values);
        id
    }

    pub fn constant_true(&mut self, result_type: Word) -> Word {
        self.global(Op::ConstantTrue, result_type, &[])
    }

    pub fn constant_false(&mut self, result_type: Word) -> Word {
        self.global(Op::ConstantFalse, result_type, &[])
    }

    pub fn constant_bit32(&mut self, result_type: Word, value: u32) -> Word {
        self.global(Op::Constant, result_type, &[value])
    }

    pub fn constant_bit64(&mut self, result_type: Word, value: u64) -> Word {
        self.global(Op::Constant, result_type, &[value as u32, (value >> 32) as u32])
    }

    pub fn spec_constant_bit32(&mut self, result_type: Word, value: u32) -> Word {
        self.global(Op::SpecConstant, result_type, &[value])
    }

    pub fn spec_constant_bit64(&mut self, result_type: Word, value: u64) -> Word {
        self.global(Op::SpecConstant, result_type, &[value as u32, (value >> 32) as u32])
    }

    pub fn constant_composite(&mut self, result_type: Word, constituents: impl IntoIterator<Item = Word>) -> Word {
        let id = self.id();
        let start = self.globals.len();
        self.globals.extend([head(Op::ConstantComposite, 0), result_type, id]);
        self.globals.extend(constituents);
        finish(&mut self.globals, start);
        id
    }

    pub fn spec_constant_composite(&mut self, result_type: Word, constituents: impl IntoIterator<Item = Word>) -> Word {
        let id = self.id();
        let start = self.globals.len();
        self.globals.extend([head(Op::SpecConstantComposite, 0), result_type, id]);
        self.globals.extend(constituents);
        finish(&mut self.globals, start);
        id
    }

    /// `OpSpecConstantOp` computing `opcode` of `args`, with a fresh id.
    pub fn spec_constant_op(&mut self, result_type: Word, opcode: Op, args: &[Word]) -> Word {
        let id = self.id();
        let start = self.globals.len();
        self.globals.extend([head(Op::SpecConstantOp, 0), result_type, id, opcode as u32]);
        self.globals.extend_from_slice(args);
        finish(&mut self.globals, start);
        id
    }
}

/// Instructions with a result type, a result id and a fixed number of id
/// operands.
macro_rules! id_ops {
    ($($name:ident => $op:ident($($arg:ident),*);)*) => {
        impl Builder {
            $(
                #[inline]
                #[allow(clippy::too_many_arguments)] // as many as the instruction has operands
                pub fn $name(&mut self, result_type: Word, result_id: Option<Word>, $($arg: Word),*) -> BuildResult<Word> {
                    self.op(Op::$op, result_type, result_id, &[$($arg),*])
                }
            )*
        }
    };
}

id_ops! {
    atomic_and => AtomicAnd(pointer, memory, semantics, value);
    atomic_compare_exchange => AtomicCompareExchange(pointer, memory, equal, unequal, value, comparator);
    atomic_exchange => AtomicExchange(pointer, memory, semantics, value);
    atomic_i_add => AtomicIAdd(pointer, memory, semantics, value);
    atomic_load => AtomicLoad(pointer, memory, semantics);
    atomic_or => AtomicOr(pointer, memory, semantics, value);
    atomic_i_sub => AtomicISub(pointer, memory, semantics, value);
    atomic_xor => AtomicXor(pointer, memory, semantics, value);
    bit_count => BitCount(base);
    bit_reverse => BitReverse(base);
    bitcast => Bitcast(operand);
    bitwise_and => BitwiseAnd(a, b);
    bitwise_or => BitwiseOr(a, b);
    bitwise_xor => BitwiseXor(a, b);
    convert_u_to_ptr => ConvertUToPtr(value);
    copy_object => CopyObject(operand);
    f_add => FAdd(a, b);
    f_convert => FConvert(value);
    f_negate => FNegate(operand);
    f_ord_equal => FOrdEqual(a, b);
    f_ord_greater_than_equal => FOrdGreaterThanEqual(a, b);
    f_ord_less_than => FOrdLessThan(a, b);
    f_ord_not_equal => FOrdNotEqual(a, b);
    group_non_uniform_ballot => GroupNonUniformBallot(execution, predicate);
    group_non_uniform_broadcast_first => GroupNonUniformBroadcastFirst(execution, value);
    group_non_uniform_shuffle => GroupNonUniformShuffle(execution, value, invocation);
    i_add => IAdd(a, b);
    i_equal => IEqual(a, b);
    i_mul => IMul(a, b);
    i_not_equal => INotEqual(a, b);
    i_sub => ISub(a, b);
    logical_and => LogicalAnd(a, b);
    logical_equal => LogicalEqual(a, b);
    logical_not => LogicalNot(operand);
    logical_or => LogicalOr(a, b);
    not => Not(operand);
    read_clock_khr => ReadClockKHR(scope);
    s_div => SDiv(a, b);
    s_greater_than => SGreaterThan(a, b);
    s_greater_than_equal => SGreaterThanEqual(a, b);
    s_less_than => SLessThan(a, b);
    s_mul_extended => SMulExtended(a, b);
    s_negate => SNegate(operand);
    s_rem => SRem(a, b);
    select => Select(condition, a, b);
    shift_left_logical => ShiftLeftLogical(base, shift);
    shift_right_arithmetic => ShiftRightArithmetic(base, shift);
    shift_right_logical => ShiftRightLogical(base, shift);
    u_convert => UConvert(value);
    u_div => UDiv(a, b);
    u_greater_than => UGreaterThan(a, b);
    u_greater_than_equal => UGreaterThanEqual(a, b);
    u_less_than => ULessThan(a, b);
    u_less_than_equal => ULessThanEqual(a, b);
    u_mod => UMod(a, b);
    u_mul_extended => UMulExtended(a, b);
    vector_extract_dynamic => VectorExtractDynamic(vector, index);
}
