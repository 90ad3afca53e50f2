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
import sys
import time

from asyncua import Client, ua

MV = "http://opcfoundation.org/UA/MachineVision"
OURS = "urn:sealcheck:opcua"


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
        def text(key):
            value = fields.get(key)
            value = value.Value if value is not None else None
            return getattr(value, "Id", value)
        content = text("ResultContent")
        part = text("PartId")
        if not isinstance(part, (str, type(None))):
            # Without the server's data types (watch): the part id from the content.
            part = str(json.loads(content[0])["part_id"])
            content = None
        job = text("JobId")
        self.events.append({
            "job": job if isinstance(job, (str, type(None))) else None,
            "part": part,
            "state": text("ResultState"),

            "content": content,
            "type": str(fields["EventType"].Value),
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
        # NodeSet's structures (their TrimmedString fields); the part id comes
        # from ResultContent (the event's JSON), the JobId from the call.
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
            job_ids.append(job.Id)
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
    print(json.dumps({"seconds": time.monotonic() - start, "state": str(state)}))


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
