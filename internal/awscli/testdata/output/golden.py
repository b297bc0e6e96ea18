# Renders a saved response with the AWS CLI's own table and text formatters (awscli 1.45,
# colour off) to make the golden files the Go port is compared with:
#   python golden.py describe-cluster.json DescribeCluster [WIDTH]
# writes describe-cluster.table (or describe-cluster.WIDTH.table) and describe-cluster.text.
import collections, io, json, sys

from awscli.formatter import TableFormatter, TextFormatter
from awscli.table import MultiTable, Styler


class Args:
    color = 'off'
    query = None


path, op = sys.argv[1], sys.argv[2]
width = int(sys.argv[3]) if len(sys.argv) > 3 else 80
load = lambda: json.load(open(path), object_pairs_hook=collections.OrderedDict)
t = TableFormatter(Args())
t.table = MultiTable(initial_section=False, column_separator='|', styler=Styler())
t.table._terminal_width = width
s = io.StringIO()
t(op, load(), s)
suffix = '.table' if len(sys.argv) <= 3 else '.%d.table' % width
open(path[:-5] + suffix, 'w').write(s.getvalue())
s = io.StringIO()
TextFormatter(Args())(op, load(), s)
open(path[:-5] + '.text', 'w').write(s.getvalue())
