#!/usr/bin/env python3
"""Writes SigV4 test vectors signed by botocore, the signer of AWS CLI v1 and boto3.

Each vector is a SageMaker request made through a real botocore client (so it carries exactly the
headers botocore adds and signs), signed by botocore's SigV4Auth at a fixed time with a known test
key, and captured at the 'before-send' event instead of being sent. The Go tests in
internal/auth replay the vectors against Verifier without needing python.

Run from internal/auth:  python3 testdata/make_botocore_vectors.py
"""
import datetime
import json
import os

import botocore
import botocore.auth
import botocore.awsrequest
import botocore.compat
import botocore.config
import botocore.session

ACCESS_KEY = "AKIAHALETESTKEY00001"
SECRET_KEY = "hAlEtEsTsEcReT/kEy+0123456789abcdefghijk"
SIGNED_AT = datetime.datetime(2026, 3, 14, 15, 9, 26)  # naive UTC, as botocore uses
ENDPOINT = "http://127.0.0.1:8080"

# Fix botocore's clock: SigV4Auth.add_auth takes its timestamp from this function.
botocore.auth.get_current_datetime = lambda remove_tzinfo=True: SIGNED_AT


def capture(name, op, params, region="us-east-1", endpoint=ENDPOINT, token=None, extra_headers=None):
    session = botocore.session.get_session()
    client = session.create_client(
        "sagemaker",
        region_name=region,
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        aws_session_token=token,
        config=botocore.config.Config(retries={"total_max_attempts": 1}),
    )
    captured = {}

    def add_headers(request, **kwargs):
        for k, v in (extra_headers or {}).items():
            request.headers[k] = v

    def before_send(request, **kwargs):
        captured["request"] = request
        return botocore.awsrequest.AWSResponse(request.url, 200, {}, _Raw(b'{"ClusterSummaries":[]}'))

    if extra_headers:
        # before-sign runs just before SigV4Auth.add_auth, so these headers are signed.
        client.meta.events.register_first("before-sign.sagemaker", add_headers)
    client.meta.events.register("before-send.sagemaker", before_send)
    try:
        getattr(client, op)(**params)
    except Exception:
        pass  # the fake responses need not parse for every operation; the request is what we keep
    req = captured["request"]
    body = req.body or b""
    if isinstance(body, str):
        body = body.encode("utf-8")
    auth = req.headers["Authorization"]
    auth = auth.decode() if isinstance(auth, bytes) else auth
    headers = []
    for k, v in req.headers.items():
        headers.append([k, v.decode() if isinstance(v, bytes) else v])
    split = botocore.compat.urlsplit(req.url)
    vec = {
        "name": name,
        "botocore_version": botocore.__version__,
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
        "session_token": token or "",
        "region": region,
        "signed_at": SIGNED_AT.strftime("%Y%m%dT%H%M%SZ"),
        "method": req.method,
        "host": split.netloc,
        "path": split.path or "/",
        "raw_query": split.query,
        "headers": headers,
        "body": body.decode("utf-8"),
    }
    with open(os.path.join(os.path.dirname(__file__), "botocore_" + name + ".json"), "w") as f:
        json.dump(vec, f, indent=2, sort_keys=True)
        f.write("\n")
    print(name, auth)


class _Raw:
    def __init__(self, data):
        self._data = data

    def stream(self, **kwargs):
        yield self._data


capture("list_clusters", "list_clusters", {})
capture(
    "list_clusters_params",
    "list_clusters",
    {"MaxResults": 10, "NameContains": "train  ing", "SortBy": "NAME", "SortOrder": "Ascending"},
    region="eu-west-1",
)
capture(
    "create_cluster",
    "create_cluster",
    {
        "ClusterName": "ml-cluster-1",
        "InstanceGroups": [
            {
                "InstanceGroupName": "controller",
                "InstanceType": "ml.c5.xlarge",
                "InstanceCount": 1,
                "LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lifecycle/", "OnCreate": "on_create.sh"},
                "ExecutionRole": "arn:aws:iam::123456789012:role/HaleExecution",
                "ThreadsPerCore": 1,
            },
            {
                "InstanceGroupName": "workers",
                "InstanceType": "ml.p5.48xlarge",
                "InstanceCount": 4,
                "LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lifecycle/", "OnCreate": "on_create.sh"},
                "ExecutionRole": "arn:aws:iam::123456789012:role/HaleExecution",
            },
        ],
        "Tags": [{"Key": "team", "Value": "ml \u00e9quipe"}],
    },
)
# A header with runs of spaces, signed: checks both sides trim and collapse values alike.
capture(
    "list_clusters_extra_header",
    "list_clusters",
    {},
    extra_headers={"X-Hale-Note": "  two   spaces  here "},
)
# Temporary credentials: hale has none, so the verifier must refuse the token.
capture("list_clusters_session_token", "list_clusters", {}, token="FwoGZXIvYXdzEXAMPLETOKEN")
# A Date header instead of X-Amz-Date: botocore then signs "date" (SigV4 allows either). hale's
# verifier recomputes with the Go SDK signer, which always signs x-amz-date, so it must refuse
# this one with a message naming the header difference.
capture(
    "list_clusters_date_header",
    "list_clusters",
    {},
    extra_headers={"Date": "Sat, 14 Mar 2026 15:09:26 GMT"},
)
