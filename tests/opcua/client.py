#!/usr/bin/env python3
"""An OPC UA client of sealcheck's Machine Vision server (tests/opcua.rs),
Python asyncua 2.1.0 (scripts/requirements.txt). Every wait is bounded.

  client.py browse URL                 the VisionSystems, every method's InputArguments
  client.py jobs URL N FIRST [QUEUE]   subscribe (default filter), N StartSingleJob, the events
  client.py watch URL SECONDS COUNT READY  subscribe (then a line to READY), events until COUNT or SECONDS
  client.py read URL                   connect, read the server's state, print the seconds it took
  client.py recipe URL NAME COUNT FIRST UNPREPARED
                                       GetRecipeListFiltered; PrepareRecipe(NAME), its RecipePrepared;
                                       StartSingleJob(RecipeId UNPREPARED) refused; COUNT jobs with NAME
  client.py cert DIR NAME              a client certificate DIR/NAME.der and its key DIR/NAME.pem
  client.py connect URL [--policy P --mode M --cert C --key K] [--user U --password PW] [--force]
                                       a session; {"ok": false, "error": ...} when refused. --force
                                       ignores what the server's endpoints offer (a client that does
                                       not play along), so that the server's own check is what refuses

Prints one JSON object on stdout; exit 1 with the reason on stderr.
"""
import argparse
import asyncio
import json
import struct
import sys
import time
from pathlib import Path

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


def mv_id(mv, encoding, text):
    """A Machine Vision id structure (one of MASK_THEN_ID) sent as a real
    client (a PLC with the UDT) sends it: the ExtensionObject's binary body
    built by hand (`id_of` says why), the encoding mask 0 then Id."""
    data = text.encode("utf-8")
    body = struct.pack("<I", 0) + struct.pack("<i", len(data)) + data
    return ua.Variant(ua.ExtensionObject(TypeId=ua.NodeId(encoding, mv), Body=body),
                      ua.VariantType.ExtensionObject)


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
            # RecipePrepared's
            "internal": id_of(value("InternalId")),
            "external": id_of(value("ExternalId")),
        })


async def subscribe(client, system, queue, types=(1024,)):
    mv = await client.get_namespace_index(MV)
    event_types = [client.get_node(ua.NodeId(number, mv)) for number in types]
    collector = Collector()
    subscription = await client.create_subscription(50, collector)
    # The client's default filter: select clauses of the types, where clause InList.
    handle = await subscription.subscribe_events(system, event_types, queuesize=queue)
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
        print(json.dumps({"jobs": job_ids, "events": collector.events,
                          "plain": await plain_variables(client, system)}))


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


async def plain_variables(client, system):
    ours = await client.get_namespace_index(OURS)
    plain = {}
    for child in await (await system.get_child(f"{ours}:Sealcheck")).get_children():
        value = await child.read_value()
        if isinstance(value, float) and value != value:
            value = None  # NaN (not judged): JSON has no NaN
        elif not isinstance(value, (int, float, str, bool, type(None))):
            value = str(value)
        plain[(await child.read_browse_name()).Name] = value
    return plain


async def recipe(url, name, count, first, unprepared):
    async with Client(url, timeout=10) as client:
        mv = await client.get_namespace_index(MV)
        system = (await vision_systems(client))[0]
        collector, _sub, _handle = await subscribe(client, system, 1000, types=(1024, 1022))
        recipes = await system.get_child(f"{mv}:RecipeManagement")
        machine = await system.get_child([f"{mv}:VisionStateMachine", f"{mv}:AutomaticModeStateMachine"])
        start_job = await machine.get_child(f"{mv}:StartSingleJob")
        external = lambda text: mv_id(mv, 5002, text)  # RecipeIdExternalDataType
        empty_internal = ua.Variant(None, ua.VariantType.ExtensionObject)

        async def listed(prepared):
            # IsPrepared: TriStateBooleanDataType (0 false, 1 true, 2 either).
            out = await recipes.call_method(
                f"{mv}:GetRecipeListFiltered", ua.Variant(None, ua.VariantType.ExtensionObject),
                ua.Variant(None, ua.VariantType.ExtensionObject), ua.Variant(prepared, ua.VariantType.Int32),
                ua.Variant(0, ua.VariantType.UInt32), ua.Variant(0, ua.VariantType.UInt32),
                ua.Variant(0, ua.VariantType.Int32))
            complete, found, _handle, names, error = out
            return {"complete": complete, "count": found, "names": [id_of(n) for n in names or []], "error": error}

        async def job(part, recipe_id):
            out = await machine.call_method(
                start_job, ua.Variant(None, ua.VariantType.ExtensionObject),
                ua.Variant(str(part), ua.VariantType.String), external(recipe_id),
                ua.Variant(None, ua.VariantType.ExtensionObject), ua.Variant([], ua.VariantType.ExtensionObject))
            return id_of(out[0]), out[1]

        report = {"listed": await listed(2)}
        started = time.monotonic()
        internal, completed, error = await recipes.call_method(
            f"{mv}:PrepareRecipe", external(name), empty_internal)
        report["prepare"] = {"internal": id_of(internal), "completed": completed, "error": error,
                             "seconds": time.monotonic() - started}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any(e["internal"] for e in collector.events):
            await asyncio.sleep(0.05)
        report["prepared_after"] = time.monotonic() - started
        report["listed_prepared"] = await listed(1)
        report["plain_prepared"] = await plain_variables(client, system)
        report["unprepared_job"] = await job(first - 1, unprepared)
        jobs = []
        for k in range(count):
            jobs.append(await job(first + k, name))
            await asyncio.sleep(0.03)
        report["jobs"] = jobs
        await wait_for(collector, count + 1, 60)
        report["events"] = collector.events
        report["plain"] = await plain_variables(client, system)
        print(json.dumps(report))


async def cert(directory, name):
    from cryptography.x509.oid import ExtendedKeyUsageOID
    from asyncua.crypto.cert_gen import setup_self_signed_certificate
    directory = Path(directory)
    await setup_self_signed_certificate(
        directory / f"{name}.pem", directory / f"{name}.der", f"urn:sealcheck-tests:{name}",
        "localhost", [ExtendedKeyUsageOID.CLIENT_AUTH], {"commonName": f"sealcheck-tests {name}"})
    print(json.dumps({"cert": str(directory / f"{name}.der"), "key": str(directory / f"{name}.pem")}))


def force_anonymous_and_none(client):
    """Makes `client` send what it is told whatever the server's endpoints
    offer: an endpoint of its own security when none matches, and the
    anonymous token's policy id the server would take if it took anonymous
    clients. So a refusal comes from the server's checks, not the client's
    good manners."""
    found = Client.find_endpoint

    def find_endpoint(endpoints, mode, policy_uri):
        try:
            return found(endpoints, mode, policy_uri)
        except ua.UaError:
            endpoint = ua.EndpointDescription()
            endpoint.SecurityMode = mode
            endpoint.SecurityPolicyUri = policy_uri
            endpoint.UserIdentityTokens = []
            return endpoint

    Client.find_endpoint = staticmethod(find_endpoint)

    def anonymous(params):
        params.UserIdentityToken = ua.AnonymousIdentityToken()
        params.UserIdentityToken.PolicyId = "anonymous"

    client._add_anonymous_auth = anonymous


async def connect(url, policy, mode, cert_file, key_file, user, password, force):
    from asyncua.crypto import security_policies
    client = Client(url, timeout=10)
    client.application_uri = "urn:sealcheck-tests:" + (Path(cert_file).stem if cert_file else "anonymous")
    if force:
        force_anonymous_and_none(client)
    if user:
        client.set_user(user)
        client.set_password(password)
    try:
        if policy != "None":
            await client.set_security(
                getattr(security_policies, f"SecurityPolicy{policy}"), cert_file, key_file,
                mode=getattr(ua.MessageSecurityMode, mode))
        async with client:
            state = await client.nodes.server_state.read_value()
            print(json.dumps({"ok": True, "state": ua.ServerState(int(state)).name}))
    except Exception as error:  # noqa: BLE001 - the test reads why
        print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}"}))


def main():
    command, url = sys.argv[1], sys.argv[2]
    if command == "connect":
        parser = argparse.ArgumentParser(prog="client.py connect")
        parser.add_argument("url")
        parser.add_argument("--policy", default="None")
        parser.add_argument("--mode", default="SignAndEncrypt")
        parser.add_argument("--cert")
        parser.add_argument("--key")
        parser.add_argument("--user")
        parser.add_argument("--password")
        parser.add_argument("--force", action="store_true")
        a = parser.parse_args(sys.argv[2:])
        asyncio.run(asyncio.wait_for(
            connect(a.url, a.policy, a.mode, a.cert, a.key, a.user, a.password, a.force), 60))
        return
    if command == "browse":
        coroutine = browse(url)
    elif command == "jobs":
        queue = int(sys.argv[5]) if len(sys.argv) > 5 else 1000
        coroutine = jobs(url, int(sys.argv[3]), int(sys.argv[4]), queue)
    elif command == "watch":
        coroutine = watch(url, float(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif command == "read":
        coroutine = read(url)
    elif command == "recipe":
        coroutine = recipe(url, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    elif command == "cert":
        coroutine = cert(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(f"unknown command {command}")
    asyncio.run(asyncio.wait_for(coroutine, 120))


if __name__ == "__main__":
    main()
