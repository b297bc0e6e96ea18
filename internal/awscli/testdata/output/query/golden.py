# Prints, with the AWS CLI's own formatters and pagination (awscli 1.45, botocore's
# PageIterator, jmespath.py; colour off, 80 columns), what `--query Q --output json|text|table`
# shows for each case of cases.tsv, into NAME.golden; the Go test (TestQueryMatchesTheAWSCLI)
# must print the same bytes.
#   cd internal/awscli/testdata/output/query && python golden.py
# A response file ending in .pages.json is a list of pages served by NextToken ("t1", "t2",
# ...), which the CLI pages through as it does a paginated operation.
import collections, copy, io, json

import jmespath
from botocore.paginate import Paginator
from awscli.formatter import JSONFormatter, TableFormatter, TextFormatter
from awscli.table import MultiTable, Styler


class Args:
    color = 'off'

    def __init__(self, query):
        self.query = jmespath.compile(query) if query != '-' else None


def load(path):
    return json.load(open(path), object_pairs_hook=collections.OrderedDict)


def response(path, op, max_items, starting_token):
    """The response the formatters get: a PageIterator for pages, else the document."""
    if not path.endswith('.pages.json'):
        return load(path)
    pages = load(path)
    by_token = {None: pages[0]}
    for p in pages:
        if 'NextToken' in p:
            by_token[p['NextToken']] = pages[len(by_token)]

    def call(**kwargs):
        return copy.deepcopy(by_token[kwargs.get('NextToken')])

    result_key = {'ListClusterNodes': 'ClusterNodeSummaries'}[op]
    config = {'input_token': 'NextToken', 'output_token': 'NextToken',
              'limit_key': 'MaxResults', 'result_key': result_key}
    paging = {}
    if max_items != '-':
        paging['MaxItems'] = int(max_items)
    if starting_token != '-':
        paging['StartingToken'] = starting_token
    return Paginator(call, config, None).paginate(PaginationConfig=paging)


for line in open('cases.tsv'):
    if line.startswith('#') or not line.strip():
        continue
    name, path, op, max_items, starting_token, query = line.rstrip('\n').split('\t', 5)
    out = io.StringIO()
    for fmt in ('json', 'text', 'table'):
        args = Args(query)
        if fmt == 'json':
            f = JSONFormatter(args)
        elif fmt == 'text':
            f = TextFormatter(args)
        else:
            f = TableFormatter(args)
            f.table = MultiTable(initial_section=False, column_separator='|', styler=Styler())
            f.table._terminal_width = 80
        s = io.StringIO()
        f(op, response(path, op, max_items, starting_token), s)
        out.write('--- %s\n%s' % (fmt, s.getvalue()))
    open(name + '.golden', 'w').write(out.getvalue())
