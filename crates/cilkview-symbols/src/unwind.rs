//! The rule to find the return address at a code address, from the file's `.eh_frame` (gimli's
//! unwind tables): the CFA (canonical frame address) is a register plus an offset, and the return
//! address is saved at a fixed offset from the CFA (−8 on x86-64).

use std::borrow::Cow;

use gimli::UnwindSection;
use object::{Object, ObjectSection};

/// Why there is no return-address rule at an address.
#[derive(Debug, thiserror::Error)]
pub enum UnwindError {
    /// No FDE covers it.
    #[error("no call-frame information")]
    NoFde,
    /// The CFI cannot be read.
    #[error("{0}")]
    Cfi(gimli::Error),
    #[error("the CFA is a DWARF expression")]
    CfaExpression,
    /// A rule other than "at an offset from the CFA" (as gimli prints it).
    #[error("return address rule {0}")]
    ReturnAddress(String),
}

/// How the CFA is computed at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfaRule {
    /// CFA = value of `register` (DWARF number; `name` e.g. `"rsp"`, `"rbp"`) + `offset`.
    RegisterOffset {
        register: u16,
        name: &'static str,
        offset: i64,
    },
}

/// Where the return address is at one code address: in memory at CFA + `return_address_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReturnAddressRule {
    pub cfa: CfaRule,
    pub return_address_offset: i64,
    /// The start of the FDE covering the address (the function's entry), as an ELF virtual
    /// address here; [`crate::Symbolizer::return_address_rule`] makes it file-relative.
    pub function_start: u64,
}

impl ReturnAddressRule {
    /// The address of the saved return address, given the CFA register's value there.
    pub fn slot(&self, register_value: u64) -> u64 {
        let CfaRule::RegisterOffset { offset, .. } = self.cfa;
        register_value
            .wrapping_add_signed(offset)
            .wrapping_add_signed(self.return_address_offset)
    }
}

/// The `.eh_frame` of a file and the addresses its pointers are relative to.
pub(crate) struct Cfi {
    data: Vec<u8>,
    little_endian: bool,
    eh_frame: u64,
    text: u64,
    got: u64,
}

impl Cfi {
    pub fn load(file: &object::File) -> Cfi {
        let section = file.section_by_name(".eh_frame");
        let addr = |name: &str| file.section_by_name(name).map_or(0, |s| s.address());
        Cfi {
            data: section
                .as_ref()
                .and_then(|s| s.uncompressed_data().ok())
                .map(Cow::into_owned)
                .unwrap_or_default(),
            little_endian: file.is_little_endian(),
            eh_frame: section.as_ref().map_or(0, |s| s.address()),
            text: addr(".text"),
            got: addr(".got"),
        }
    }

    /// The rule at ELF virtual address `address`.
    pub fn rule(&self, address: u64) -> Result<ReturnAddressRule, UnwindError> {
        let endian = if self.little_endian {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let mut eh = gimli::EhFrame::new(&self.data, endian);
        eh.set_address_size(8);
        let bases = gimli::BaseAddresses::default()
            .set_eh_frame(self.eh_frame)
            .set_text(self.text)
            .set_got(self.got);
        let fde = match eh.fde_for_address(&bases, address, gimli::EhFrame::cie_from_offset) {
            Ok(fde) => fde,
            Err(gimli::Error::NoUnwindInfoForAddress) => return Err(UnwindError::NoFde),
            Err(e) => return Err(UnwindError::Cfi(e)),
        };
        let mut ctx = Box::new(gimli::UnwindContext::new());
        let row = fde
            .unwind_info_for_address(&eh, &bases, &mut ctx, address)
            .map_err(UnwindError::Cfi)?;
        let cfa = match *row.cfa() {
            gimli::CfaRule::RegisterAndOffset { register, offset } => CfaRule::RegisterOffset {
                register: register.0,
                name: gimli::X86_64::register_name(register).unwrap_or("?"),
                offset,
            },
            gimli::CfaRule::Expression(_) => return Err(UnwindError::CfaExpression),
        };
        let ra = fde.cie().return_address_register();
        let return_address_offset = match row.register(ra) {
            gimli::RegisterRule::Offset(o) => o,
            other => return Err(UnwindError::ReturnAddress(format!("{other:?}"))),
        };
        Ok(ReturnAddressRule {
            cfa,
            return_address_offset,
            function_start: fde.initial_address(),
        })
    }
}
