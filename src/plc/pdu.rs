//! One request PDU in, one response PDU out: which functions the server
//! serves, the checks the Modbus spec (Application Protocol v1.1b3, §6 and
//! the state diagrams) makes before it touches data, the crate's decoder,
//! and the response bytes.
//!
//! The order of the checks is the spec's: function code (exception 01),
//! quantity and byte count (03), then address and range (02, `dispatch`).

use tokio_modbus::bytes::Bytes;
use tokio_modbus::{ExceptionCode, Request, Response};

/// The function codes this server serves; every other code gets exception 01.
pub const READ_COILS: u8 = 0x01;
pub const READ_DISCRETE_INPUTS: u8 = 0x02;
pub const READ_HOLDING_REGISTERS: u8 = 0x03;
pub const READ_INPUT_REGISTERS: u8 = 0x04;
pub const WRITE_SINGLE_COIL: u8 = 0x05;
pub const WRITE_SINGLE_REGISTER: u8 = 0x06;
pub const WRITE_MULTIPLE_COILS: u8 = 0x0F;
pub const WRITE_MULTIPLE_REGISTERS: u8 = 0x10;

/// The spec's largest quantities per request.
pub const MAX_READ_BITS: u16 = 2000;
pub const MAX_READ_REGISTERS: u16 = 125;
pub const MAX_WRITE_BITS: u16 = 0x07B0;
pub const MAX_WRITE_REGISTERS: u16 = 0x007B;

/// The request in `pdu` (function code first), checked: `Err` is the
/// exception to answer.
pub fn decode(pdu: &[u8]) -> Result<Request<'static>, ExceptionCode> {
    let Some(&function) = pdu.first() else {
        return Err(ExceptionCode::IllegalFunction);
    };
    match function {
        READ_COILS
        | READ_DISCRETE_INPUTS
        | READ_HOLDING_REGISTERS
        | READ_INPUT_REGISTERS
        | WRITE_SINGLE_COIL
        | WRITE_SINGLE_REGISTER => {}
        // The crate's decoder trusts the quantity and byte count of these
        // two (it indexes and multiplies by them): they are checked first.
        WRITE_MULTIPLE_COILS => check_write_multiple(pdu, MAX_WRITE_BITS, |q| q.div_ceil(8))?,
        WRITE_MULTIPLE_REGISTERS => check_write_multiple(pdu, MAX_WRITE_REGISTERS, |q| q * 2)?,
        _ => return Err(ExceptionCode::IllegalFunction),
    }
    // A PDU of the wrong length, a coil value other than 0x0000/0xFF00, a
    // byte count that does not match: the spec's "illegal data value".
    let request = Request::try_from(Bytes::copy_from_slice(pdu))
        .map_err(|_| ExceptionCode::IllegalDataValue)?;
    match request {
        Request::ReadCoils(_, quantity) | Request::ReadDiscreteInputs(_, quantity)
            if !(1..=MAX_READ_BITS).contains(&quantity) =>
        {
            Err(ExceptionCode::IllegalDataValue)
        }
        Request::ReadHoldingRegisters(_, quantity) | Request::ReadInputRegisters(_, quantity)
            if !(1..=MAX_READ_REGISTERS).contains(&quantity) =>
        {
            Err(ExceptionCode::IllegalDataValue)
        }
        request => Ok(request),
    }
}

/// FC 0x0F / 0x10: address, quantity (1..=max), byte count (as the
/// quantity needs), the values.
fn check_write_multiple(
    pdu: &[u8],
    max: u16,
    bytes_for: impl Fn(u16) -> u16,
) -> Result<(), ExceptionCode> {
    if pdu.len() < 6 {
        return Err(ExceptionCode::IllegalDataValue);
    }
    let quantity = u16::from_be_bytes([pdu[3], pdu[4]]);
    let byte_count = u16::from(pdu[5]);
    if !(1..=max).contains(&quantity)
        || byte_count != bytes_for(quantity)
        || pdu.len() != 6 + usize::from(byte_count)
    {
        return Err(ExceptionCode::IllegalDataValue);
    }
    Ok(())
}

/// Appends the response PDU for `response` to `out`.
pub fn encode(response: &Response, out: &mut Vec<u8>) {
    out.push(response.function_code().value());
    match response {
        Response::ReadCoils(bits) | Response::ReadDiscreteInputs(bits) => {
            let bytes = bits.len().div_ceil(8);
            out.push(bytes as u8);
            let start = out.len();
            out.resize(start + bytes, 0);
            for (i, bit) in bits.iter().enumerate() {
                out[start + i / 8] |= u8::from(*bit) << (i % 8);
            }
        }
        Response::ReadHoldingRegisters(words) | Response::ReadInputRegisters(words) => {
            out.push((words.len() * 2) as u8);
            for word in words {
                out.extend_from_slice(&word.to_be_bytes());
            }
        }
        Response::WriteSingleCoil(address, value) => {
            out.extend_from_slice(&address.to_be_bytes());
            out.extend_from_slice(&(if *value { 0xFF00u16 } else { 0 }).to_be_bytes());
        }
        Response::WriteSingleRegister(address, value) => {
            out.extend_from_slice(&address.to_be_bytes());
            out.extend_from_slice(&value.to_be_bytes());
        }
        Response::WriteMultipleCoils(address, quantity)
        | Response::WriteMultipleRegisters(address, quantity) => {
            out.extend_from_slice(&address.to_be_bytes());
            out.extend_from_slice(&quantity.to_be_bytes());
        }
        // `dispatch` answers no other function.
        other => unreachable!("no response of this server is {other:?}"),
    }
}

/// Appends the exception response for `function` to `out`.
pub fn encode_exception(function: u8, exception: ExceptionCode, out: &mut Vec<u8>) {
    out.push(function | 0x80);
    out.push(u8::from(exception));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_high_function_codes_are_illegal_functions() {
        for function in [
            0x00, 0x07, 0x08, 0x11, 0x16, 0x17, 0x2B, 0x7F, 0x80, 0x81, 0xFF,
        ] {
            assert_eq!(
                decode(&[function, 0, 0, 0, 1]),
                Err(ExceptionCode::IllegalFunction),
                "{function:#x}"
            );
        }
    }

    #[test]
    fn bad_lengths_values_and_quantities_are_illegal_data_values() {
        let bad: &[&[u8]] = &[
            &[0x03, 0, 0, 0],               // truncated
            &[0x03, 0, 0, 0, 1, 9],         // too long
            &[0x03, 0, 0, 0, 0],            // quantity 0
            &[0x04, 0, 0, 0, 126],          // over 125 registers
            &[0x01, 0, 0, 0x07, 0xD1],      // over 2000 bits
            &[0x05, 0, 1, 0x12, 0x34],      // coil value not 0/FF00
            &[0x0F, 0, 0, 0, 100, 1, 0xFF], // 100 coils in 1 byte (the crate would index past it)
            &[0x10, 0, 0, 0x80, 0, 0],      // 32768 registers (the crate would overflow)
            &[0x10, 0, 0, 0, 2, 4, 0, 1],   // fewer values than the byte count
            &[0x0F, 0],                     // truncated header
        ];
        for pdu in bad {
            assert_eq!(
                decode(pdu),
                Err(ExceptionCode::IllegalDataValue),
                "{pdu:x?}"
            );
        }
    }

    #[test]
    fn good_requests_decode() {
        assert_eq!(
            decode(&[0x04, 0, 2, 0, 9]),
            Ok(Request::ReadInputRegisters(2, 9))
        );
        assert_eq!(
            decode(&[0x05, 0, 1, 0xFF, 0]),
            Ok(Request::WriteSingleCoil(1, true))
        );
        assert_eq!(
            decode(&[0x0F, 0, 0, 0, 3, 1, 0b101]),
            Ok(Request::WriteMultipleCoils(
                0,
                vec![true, false, true].into()
            ))
        );
        assert_eq!(
            decode(&[0x10, 0, 0, 0, 2, 4, 0x12, 0x34, 0x56, 0x78]),
            Ok(Request::WriteMultipleRegisters(
                0,
                vec![0x1234, 0x5678].into()
            ))
        );
    }

    #[test]
    fn responses_encode_as_the_spec_lays_them_out() {
        let mut out = Vec::new();
        encode(
            &Response::ReadDiscreteInputs(vec![
                true, false, true, true, false, false, false, false, true,
            ]),
            &mut out,
        );
        assert_eq!(out, [0x02, 2, 0b0000_1101, 0b1]);
        out.clear();
        encode(&Response::ReadInputRegisters(vec![0x1234, 7]), &mut out);
        assert_eq!(out, [0x04, 4, 0x12, 0x34, 0, 7]);
        out.clear();
        encode(&Response::WriteSingleCoil(1, true), &mut out);
        assert_eq!(out, [0x05, 0, 1, 0xFF, 0]);
        out.clear();
        encode_exception(0x03, ExceptionCode::IllegalDataAddress, &mut out);
        assert_eq!(out, [0x83, 0x02]);
    }
}
