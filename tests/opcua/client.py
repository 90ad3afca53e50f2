#!/usr/bin/env python3
"""An OPC UA client of sealcheck's Machine Vision server (tests/opcua.rs),
Python asyncua 2.1.0 (scripts/requirements.txt). Every wait is bounded.

  client.py browse URL                 the VisionSystems, every method's InputArguments
  client.py jobs URL N FIRST [QUEUE]   subscribe (default filter), N StartSingleJob, the events
  client.py watch URL SECONDS COUNT READY  subscribe (then a line to READY), events until COUNT or SECONDS
  client.py read URL                   connect, read the server's state, print the seconds it took

Prints one JSON object on stdout; exit 1 with the reason on stderr.
"""
import asyncio
import json
import struct
import sys
import time

from asyncua import Client, ua

MV = "http://opcfoundation.org/UA/MachineVision"
OURS = "urn:sealcheck:opcua"


# The Machine Vision id structures' default binary encodings (NodeIds.csv):
# those whose only field is Id, and those with optional fields after it
# (their body starts with the UInt32 encoding mask).
ID_ONLY = {5008: "JobIdDataType", 5274: "ResultIdDataType"}
MASK_THEN_ID = {5006: "MeasIdDataType", 5013: "PartIdDataType", 5224: "ProductIdDataType",
                5002: "RecipeIdExternalDataType", 5268: "RecipeIdInternalDataType",
                5090: "ConfigurationIdDataType"}


def id_of(value):
    """The Id of a Machine Vision id structure, decoded by hand.

    asyncua 2.1.0 cannot build the NodeSet's structures (its
    load_data_type_definitions fails on their fields of the NodeSet's own
    String subtype TrimmedString), so they arrive as ExtensionObjects with
    their binary body undecoded. The body (OPC UA Part 6, 5.2.7): the UInt32
    encoding mask where the type has optional fields, then Id as a String
    (Int32 length, UTF-8). Anything else is returned as it came (a plain
    String stays a String)."""
    if isinstance(value, ua.ExtensionObject) and value.Body is not None:
        number = value.TypeId.Identifier
        body = bytes(value.Body)
        if number in ID_ONLY:
            offset = 0
        elif number in MASK_THEN_ID:
            offset = 4
        else:
            raise SystemExit(f"an ExtensionObject of an unexpected type {value.TypeId}")
        (length,) = struct.unpack_from("<i", body, offset)
        if length < 0:
            return None
        return body[offset + 4:offset + 4 + length].decode("utf-8")
    return getattr(value, "Id", value)


async def vision_systems(client):
    objects = client.nodes.objects
    mv = await client.get_namespace_index(MV)
    found = []
    for node in await objects.get_children():
        definition = await node.read_type_definition()
        if definition == ua.NodeId(1003, mv):
            found.append(node)
    return found


async def methods_of(node, depth=0):
    out = []
    for child in await node.get_children():
        node_class = await child.read_node_class()
        if node_class == ua.NodeClass.Method:
            out.append(child)
        elif node_class == ua.NodeClass.Object and depth < 3:
            out.extend(await methods_of(child, depth + 1))
    return out


async def browse(url):
    async with Client(url, timeout=10) as client:
        systems = await vision_systems(client)
        report = {"namespaces": await client.get_namespace_array(), "systems": []}
        for system in systems:
            entry = {"name": (await system.read_browse_name()).Name, "methods": {}}
            for method in await methods_of(system):
                name = (await method.read_browse_name()).Name
                args = {}
                for prop in await method.get_properties():
                    prop_name = (await prop.read_browse_name()).Name
                    value = await prop.read_value()
                    args[prop_name] = [[a.Name, a.ValueRank, list(a.ArrayDimensions or [])] for a in value]
                entry["methods"][name] = args
            report["systems"].append(entry)
        print(json.dumps(report))


class Collector:
    def __init__(self):
        self.events = []

    def event_notification(self, event):
        fields = event.get_event_props_as_fields_dict()
        def value(key):
            field = fields.get(key)
            return field.Value if field is not None else None
        self.events.append({
            "job": id_of(value("JobId")),
            "part": id_of(value("PartId")),
            "recipe": id_of(value("InternalRecipeId")),
            "state": value("ResultState"),
            "content": value("ResultContent"),
            "type": str(value("EventType")),
        })


async def subscribe(client, system, queue):
    mv = await client.get_namespace_index(MV)
    event_type = client.get_node(ua.NodeId(1024, mv))
    collector = Collector()
    subscription = await client.create_subscription(50, collector)
    # The client's default filter: select clauses of the type, where clause InList.
    handle = await subscription.subscribe_events(system, event_type, queuesize=queue)
    return collector, subscription, handle


async def wait_for(collector, count, seconds):
    deadline = time.monotonic() + seconds
    while len(collector.events) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def jobs(url, count, first, queue):
    async with Client(url, timeout=10) as client:
        # No load_data_type_definitions(): asyncua 2.1.0 cannot build the
        # NodeSet's structures (`id_of` says why); their ids are decoded by hand.
        system = (await vision_systems(client))[0]
        collector, _sub, _handle = await subscribe(client, system, queue)
        machine = await system.get_child([f"{await client.get_namespace_index(MV)}:VisionStateMachine",
                                          f"{await client.get_namespace_index(MV)}:AutomaticModeStateMachine"])
        mv = await client.get_namespace_index(MV)
        start = await machine.get_child(f"{mv}:StartSingleJob")
        job_ids = []
        for k in range(count):
            # PartId as a plain String (sealcheck takes it, as PLC blocks send it).
            result = await machine.call_method(
                start,
                ua.Variant(None, ua.VariantType.ExtensionObject),
                ua.Variant(str(first + k), ua.VariantType.String),
                ua.Variant(None, ua.VariantType.ExtensionObject),
                ua.Variant(None, ua.VariantType.ExtensionObject),
                ua.Variant([], ua.VariantType.ExtensionObject),
            )
            job, error = result
            job_ids.append(id_of(job))
            if error != 0:
                raise SystemExit(f"StartSingleJob part {first + k}: Error {error}")
            await asyncio.sleep(0.03)
        await wait_for(collector, count, 60)
        ours = await client.get_namespace_index(OURS)
        plain = {}
        for child in await (await system.get_child(f"{ours}:Sealcheck")).get_children():
            plain[(await child.read_browse_name()).Name] = await child.read_value()
        print(json.dumps({"jobs": job_ids, "events": collector.events,
                          "plain": {k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in plain.items()}}))


async def watch(url, seconds, count, ready):
    async with Client(url, timeout=30) as client:
        system = (await vision_systems(client))[0]
        collector, _sub, _handle = await subscribe(client, system, 1000)
        with open(ready, "a") as f:
            f.write("subscribed\n")
        await wait_for(collector, count, seconds)
        print(json.dumps({"events": collector.events}))


async def read(url):
    start = time.monotonic()
    async with Client(url, timeout=5) as client:
        state = await client.nodes.server_state.read_value()
    # ServerState is an enumeration: asyncua reads it as its Int32 (0 = Running).
    print(json.dumps({"seconds": time.monotonic() - start, "state": ua.ServerState(int(state)).name}))


def main():
    command, url = sys.argv[1], sys.argv[2]
    if command == "browse":
        coroutine = browse(url)
    elif command == "jobs":
        queue = int(sys.argv[5]) if len(sys.argv) > 5 else 1000
        coroutine = jobs(url, int(sys.argv[3]), int(sys.argv[4]), queue)
    elif command == "watch":
        coroutine = watch(url, float(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif command == "read":
        coroutine = read(url)
    else:
        raise SystemExit(f"unknown command {command}")
    asyncio.run(asyncio.wait_for(coroutine, 120))


if __name__ == "__main__":
    main()
