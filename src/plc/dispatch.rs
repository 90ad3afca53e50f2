//! A checked request against the stations: which unit, which table, which
//! addresses (exception 02 outside the map), and the response.

use std::sync::Arc;

use tokio_modbus::{ExceptionCode, Request, Response};

use super::map::{COILS, DISCRETE_INPUTS, HOLDING_REGISTERS, INPUT_REGISTERS};
use super::pdu;
use super::station::Station;

/// The answer to one request PDU from unit `unit`, appended to `out` (a
/// response or an exception; every request gets one).
pub fn answer(stations: &[Arc<Station>], unit: u8, request: &[u8], out: &mut Vec<u8>) {
    let function = request.first().copied().unwrap_or(0);
    let result = station(stations, unit)
        .and_then(|station| pdu::decode(request).and_then(|req| serve(station, req)));
    match result {
        Ok(response) => pdu::encode(&response, out),
        Err(exception) => pdu::encode_exception(function, exception, out),
    }
}

/// Unit id 1 is the first camera; any other unit id (0 and 255 included)
/// gets exception 0x0B, "gateway target device failed to respond".
fn station(stations: &[Arc<Station>], unit: u8) -> Result<&Station, ExceptionCode> {
    usize::from(unit)
        .checked_sub(1)
        .and_then(|i| stations.get(i))
        .map(|s| s.as_ref())
        .ok_or(ExceptionCode::GatewayTargetDevice)
}

/// `address..address + quantity` inside a table of `size`: its range, else 02.
fn range(
    address: u16,
    quantity: usize,
    size: u16,
) -> Result<std::ops::Range<usize>, ExceptionCode> {
    let start = usize::from(address);
    let end = start + quantity;
    if end <= usize::from(size) {
        Ok(start..end)
    } else {
        Err(ExceptionCode::IllegalDataAddress)
    }
}

fn serve(station: &Station, request: Request<'static>) -> Result<Response, ExceptionCode> {
    Ok(match request {
        Request::ReadCoils(address, quantity) => {
            let range = range(address, quantity.into(), COILS)?;
            Response::ReadCoils(station.coils()[range].to_vec())
        }
        Request::ReadDiscreteInputs(address, quantity) => {
            let range = range(address, quantity.into(), DISCRETE_INPUTS)?;
            Response::ReadDiscreteInputs(station.discrete_inputs()[range].to_vec())
        }
        Request::ReadHoldingRegisters(address, quantity) => {
            let range = range(address, quantity.into(), HOLDING_REGISTERS)?;
            Response::ReadHoldingRegisters(station.holding_registers()[range].to_vec())
        }
        Request::ReadInputRegisters(address, quantity) => {
            let range = range(address, quantity.into(), INPUT_REGISTERS)?;
            Response::ReadInputRegisters(station.input_registers()[range].to_vec())
        }
        Request::WriteSingleCoil(address, value) => {
            range(address, 1, COILS)?;
            station.write_coil(address, value);
            Response::WriteSingleCoil(address, value)
        }
        Request::WriteMultipleCoils(address, values) => {
            range(address, values.len(), COILS)?;
            station.write_coils(address, &values);
            Response::WriteMultipleCoils(address, values.len() as u16)
        }
        Request::WriteSingleRegister(address, value) => {
            range(address, 1, HOLDING_REGISTERS)?;
            station.write_registers(address, &[value]);
            Response::WriteSingleRegister(address, value)
        }
        Request::WriteMultipleRegisters(address, values) => {
            range(address, values.len(), HOLDING_REGISTERS)?;
            station.write_registers(address, &values);
            Response::WriteMultipleRegisters(address, values.len() as u16)
        }
        // `pdu::decode` lets no other function through.
        _ => return Err(ExceptionCode::IllegalFunction),
    })
}
