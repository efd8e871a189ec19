//! What the sampler read of one JS frame (`struct js_frame` of the sampler's bpf/sampler_abi.h),
//! as a sample carries it to the stage that names it.

/// `JS_FRAME_OFFSET_REGISTER`: `bytecode_offset` is the interpreter's offset register.
pub const JS_FRAME_OFFSET_REGISTER: u16 = 1;
/// `JS_FRAME_LEAF_STACK`: the event's leaf words are the words at the stack pointer.
pub const JS_FRAME_LEAF_STACK: u16 = 2;
/// The `bytecode_offset` of a frame whose slot held no Smi (the sampler does not send what it
/// held): a word with a heap object's tag, so no Smi.
pub const NOT_A_SMI: u64 = 1;

/// What the sampler read of one JS frame (`struct js_frame`): the frame of `user_stack[depth]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JsFrameSlots {
    pub depth: u16,
    pub flags: u16,
    /// The frame's SharedFunctionInfo (tagged), read through its JSFunction at sample time.
    pub shared: u64,
    pub bytecode_array: u64,
    pub bytecode_offset: u64,
}
