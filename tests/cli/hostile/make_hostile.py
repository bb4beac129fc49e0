#!/usr/bin/python3
"""Writes the hostile inputs used by tests/cli/hostile.txt (and
tests/cli/known_bugs.txt) into this folder: graph files that are malformed,
mistyped or hostile in some other way, and broken .npy/.npz files.

Run with /usr/bin/python3 from anywhere; it needs only the standard library
(struct, zlib).  The outputs are committed; CI never runs this script.
The .npy/.npz files reuse nothing from tests/fixtures/npy/ (hostile.txt
refers to those by path, e.g. bad_object.npy, bad_c8.npy, bad_U4.npy)."""
import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(HERE, name)


def write(name, data):
    """Writes whole or not at all (a suite running meanwhile never reads a
    half-written file)."""
    if isinstance(data, str):
        data = data.encode('utf-8')
    with open(path(name) + '.part', 'wb') as f:
        f.write(data)
    os.replace(path(name) + '.part', path(name))


# ---------------------------------------------------------------------------
# graphs
# ---------------------------------------------------------------------------

DROP = object()


def overridden(d, kw):
    """d with each keyword set (or removed, for DROP)."""
    for k, v in kw.items():
        if v is DROP:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def graph(**kw):
    """A valid one-input graph y = neg(x), with keys replaced (or dropped
    with DROP); returned as JSON text, keys in the order given."""
    g = {'version': 1, 'inputs': ['x'],
         'nodes': [{'id': 'y', 'op': 'neg', 'args': ['x']}], 'outputs': 'y'}
    return json.dumps(overridden(g, kw))


def node(**kw):
    """A graph whose only node is y = kw (id "y" unless given)."""
    n = {'id': 'y'}
    n.update(kw)
    return graph(nodes=[n])


def nodes(*ns, inputs=('x',), outputs='y', consts=None):
    kw = {'inputs': list(inputs), 'nodes': list(ns), 'outputs': outputs}
    if consts is not None:
        kw['consts'] = consts
    return graph(**kw)


def const(c, out='y'):
    """A graph with const c and y = add(x, c)."""
    return nodes({'id': 'y', 'op': 'add', 'args': ['x', 'c']}, consts={'c': c}, outputs=out)


def iff(cond='c', then=DROP, els=DROP, **extra):
    """r = if(cond) then/else; a block left out (DROP) returns x."""
    n = {'id': 'r', 'op': 'if', 'cond': cond,
         'then': then if then is not DROP else {'nodes': [], 'result': 'x'},
         'else': els if els is not DROP else {'nodes': [], 'result': 'x'}}
    n.update(extra)
    return n


def with_cond(*ns, outputs='r'):
    """c = gt(x, 0) first, then the given nodes."""
    return nodes({'id': 'c', 'op': 'gt', 'args': ['x', 0]}, *ns, outputs=outputs)


def iterate(**kw):
    n = {'id': 'r', 'op': 'iterate', 'count': 3, 'init': ['x'], 'state': ['s'],
         'body': {'nodes': [{'id': 's1', 'op': 'mul', 'args': ['s', 2]}], 'result': 's1'}}
    return nodes(overridden(n, kw), outputs='r')


def mapn(**kw):
    n = {'id': 'r', 'op': 'map', 'args': ['x'], 'params': ['e'],
         'body': {'nodes': [{'id': 'e2', 'op': 'mul', 'args': ['e', 'e']}], 'result': 'e2'}}
    return nodes(overridden(n, kw), outputs='r')


NEG = '{"id": "y", "op": "neg", "args": ["x"]}'
GOOD = '{"version": 1, "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}'
LONG255 = 'n' * 255

GRAPHS = {
    # --- malformed JSON -----------------------------------------------------
    'j_empty.json': '',
    'j_blank.json': ' \n\t\n',
    'j_trunc_string.json': '{"version": 1, "inputs": ["x',
    'j_trunc_number.json': '{"version": 1',
    'j_trunc_escape.json': '{"version": 1, "doc": "ab\\',
    'j_trunc_half.json': GOOD[:len(GOOD) // 2],
    'j_trailing_object.json': GOOD + ' ' + GOOD,
    'j_trailing_comma.json': GOOD[:-1] + ',}',
    'j_trailing_garbage.json': GOOD + '\n\nxyz\n',
    'j_trailing_bracket.json': GOOD + ']',
    'j_trailing_nul.json': GOOD + '\0\0',
    'j_inner_nul.json': GOOD[:1] + '\0' + GOOD[1:],
    'j_single_quotes.json': GOOD.replace('"', "'"),
    'j_comment.json': '// a comment\n' + GOOD,
    'j_nan_literal.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "y", "op": "add", "args": ["x", NaN]}], "outputs": "y"}',
    'j_hex_number.json': '{"version": 0x1, "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}',
    'j_bad_escape.json': '{"version": 1, "doc": "a\\qb", "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}',
    'j_lone_surrogate.json': '{"version": 1, "doc": "\\ud800", "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}',
    'j_raw_tab_in_string.json': '{"version": 1, "doc": "a\tb", "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}',
    'j_raw_newline_in_name.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "y\n", "op": "neg", "args": ["x"]}], "outputs": "y\n"}',
    'j_dup_toplevel.json': '{"version": 1, "version": 1, "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}',
    'j_dup_node_key.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "y", "op": "neg", "op": "exp", "args": ["x"]}], "outputs": "y"}',
    'j_dup_attr.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "y", "op": "sum", "args": ["x"], "axes": [0], "axes": [0]}], "outputs": "y"}',
    'j_dup_const.json': '{"version": 1, "inputs": ["x"], "consts": {"c": 1, "c": 2}, "nodes": [{"id": "y", "op": "add", "args": ["x", "c"]}], "outputs": "y"}',
    'j_dup_in_block.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "c", "op": "gt", "args": ["x", 0]}, {"id": "r", "op": "if", "cond": "c", "then": {"nodes": [], "result": "x", "result": "x"}, "else": {"nodes": [], "result": "x"}}], "outputs": "r"}',
    'j_dup_deep.json': '{"version": 1, "doc": "x", "inputs": [{"name": "x", "shape": [2], "shape": [2]}], "nodes": [' + NEG + '], "outputs": "y"}',
    'j_dup_in_doc_free_text.json': '{"version": 1, "doc": {"a": 1, "a": 2}, "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}',
    'j_nul_escape_id.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "y\\u0000evil", "op": "neg", "args": ["x"]}], "outputs": "y"}',
    'j_nul_escape_op.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "y", "op": "neg\\u0000junk", "args": ["x"]}], "outputs": "y"}',
    'j_nul_escape_key.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "y", "op": "sum", "args": ["x"], "axes\\u0000junk": [0]}], "outputs": "y"}',
    'j_nul_escape_arg.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "y", "op": "neg", "args": ["x\\u0000junk"]}], "outputs": "y"}',
    'j_nul_escape_dtype.json': '{"version": 1, "inputs": [{"name": "x", "dtype": "f64\\u0000junk"}], "nodes": [' + NEG + '], "outputs": "y"}',
    # valid JSON escapes that put a newline or a terminal escape sequence
    # into an op name and an attribute key (echoed by the error message)
    'j_escaped_newline_op.json': node(op='ne\ng', args=['x']),
    'j_escape_seq_key.json': node(op='neg', args=['x'], **{'a\x1b[31mb': 1}),
    'j_top_array.json': '[' + GOOD + ']',
    'j_top_number.json': '1',
    'j_top_string.json': '"graph"',
    'j_top_null.json': 'null',
    # invalid UTF-8: overlong NUL, a UTF-16 surrogate, a stray continuation
    # byte, 0xFF, a sequence cut by the end of the file, in a name
    'j_utf8_overlong.json': b'{"version": 1, "doc": "\xc0\x80", "inputs": ["x"], "nodes": [' + NEG.encode() + b'], "outputs": "y"}',
    'j_utf8_surrogate.json': b'{"version": 1, "doc": "\xed\xa0\x80", "inputs": ["x"], "nodes": [' + NEG.encode() + b'], "outputs": "y"}',
    'j_utf8_continuation.json': b'{"version": 1, "doc": "\x80", "inputs": ["x"], "nodes": [' + NEG.encode() + b'], "outputs": "y"}',
    'j_utf8_ff.json': b'{"version": 1,\n "doc": "\xff", "inputs": ["x"], "nodes": [' + NEG.encode() + b'], "outputs": "y"}',
    'j_utf8_cut.json': GOOD.encode() + b'\xe2\x82',
    'j_utf8_in_name.json': b'{"version": 1, "inputs": ["x\xe9"], "nodes": [' + NEG.encode() + b'], "outputs": "y"}',
    'j_utf8_too_big.json': b'{"version": 1, "doc": "\xf4\x90\x80\x80", "inputs": ["x"], "nodes": [' + NEG.encode() + b'], "outputs": "y"}',
    # 10,000-deep nesting in several places
    'j_deep_array_doc.json': '{"version": 1, "doc": ' + '[' * 10000 + ']' * 10000 + ', "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}',
    'j_deep_object_doc.json': '{"version": 1, "doc": ' + '{"a": ' * 10000 + '1' + '}' * 10000 + ', "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}',
    'j_deep_open.json': '[' * 10000,
    'j_deep_args.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "y", "op": "neg", "args": ' + '[' * 10000 + '"x"' + ']' * 10000 + '}], "outputs": "y"}',
    'j_deep_data.json': '{"version": 1, "inputs": ["x"], "consts": {"c": {"shape": [1], "data": ' + '[' * 10000 + '1' + ']' * 10000 + '}}, "nodes": [{"id": "y", "op": "add", "args": ["x", "c"]}], "outputs": "y"}',
    # just under the parser's nesting limit: must fail cleanly, not recurse away
    'j_deep900_data.json': '{"version": 1, "inputs": ["x"], "consts": {"c": {"shape": [1], "data": ' + '[' * 900 + '1' + ']' * 900 + '}}, "nodes": [{"id": "y", "op": "add", "args": ["x", "c"]}], "outputs": "y"}',
    'j_deep900_args.json': '{"version": 1, "inputs": ["x"], "nodes": [{"id": "y", "op": "neg", "args": ' + '[' * 900 + '"x"' + ']' * 900 + '}], "outputs": "y"}',
    'j_deep900_doc.json': '{"version": 1, "doc": ' + '{"a": ' * 900 + '1' + '}' * 900 + ', "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}',

    # --- wrong JSON types ---------------------------------------------------
    'v_string.json': graph(version='1'),
    'v_float.json': graph(version=1.5),
    'v_two.json': graph(version=2),
    'v_bool.json': graph(version=True),
    'v_null.json': graph(version=None),
    'v_array.json': graph(version=[1]),
    'v_missing.json': graph(version=DROP),
    'v_huge.json': graph(version=1e300),
    'doc_number.json': graph(doc=5),
    'in_object.json': graph(inputs={'x': {}}),
    'in_string.json': graph(inputs='x'),
    'in_null.json': graph(inputs=None),
    'in_missing.json': graph(inputs=DROP),
    'in_number_entry.json': graph(inputs=[1]),
    'in_null_entry.json': graph(inputs=[None]),
    'in_array_entry.json': graph(inputs=[['x']]),
    'in_name_number.json': graph(inputs=[{'name': 1}]),
    'in_no_name.json': graph(inputs=[{'dtype': 'f64'}]),
    'in_dtype_number.json': graph(inputs=[{'name': 'x', 'dtype': 64}]),
    'in_dtype_f16.json': graph(inputs=[{'name': 'x', 'dtype': 'f16'}]),
    'in_dtype_int.json': graph(inputs=[{'name': 'x', 'dtype': 'i64'}]),
    'in_shape_string.json': graph(inputs=[{'name': 'x', 'shape': 'n'}]),
    'in_shape_float.json': graph(inputs=[{'name': 'x', 'shape': [1.5]}]),
    'in_shape_bool.json': graph(inputs=[{'name': 'x', 'shape': [True]}]),
    'in_shape_negative.json': graph(inputs=[{'name': 'x', 'shape': [-1]}]),
    'in_shape_huge.json': graph(inputs=[{'name': 'x', 'shape': [1e300]}]),
    'in_shape_nested.json': graph(inputs=[{'name': 'x', 'shape': [[2]]}]),
    'in_shape_17.json': graph(inputs=[{'name': 'x', 'shape': [1] * 17}]),
    'in_shape_empty_var.json': graph(inputs=[{'name': 'x', 'shape': ['']}]),
    'in_shape_object.json': graph(inputs=[{'name': 'x', 'shape': {'0': 2}}]),
    'c_array.json': graph(consts=[1, 2]),
    'c_string.json': graph(consts='c'),
    'c_null.json': graph(consts=None),
    'c_value_bool.json': const(True),
    'c_value_null.json': const(None),
    'c_value_array.json': const([1, 2]),
    'c_value_string.json': const('one'),
    'c_value_empty_object.json': const({}),
    'c_dtype_number.json': const({'dtype': 32, 'shape': [], 'fill': 1}),
    'c_dtype_f16.json': const({'dtype': 'f16', 'shape': [], 'fill': 1}),
    'c_shape_string.json': const({'shape': '2', 'fill': 1}),
    'c_shape_missing.json': const({'fill': 1}),
    'c_shape_float.json': const({'shape': [2.5], 'fill': 1}),
    'c_fill_string.json': const({'shape': [2], 'fill': 'one'}),
    'c_fill_array.json': const({'shape': [2], 'fill': [1, 2]}),
    'c_fill_and_data.json': const({'shape': [2], 'fill': 1, 'data': [1, 2]}),
    'c_no_fill_no_data.json': const({'shape': [2]}),
    'c_data_string.json': const({'shape': [2], 'data': 'ab'}),
    'c_data_bool.json': const({'shape': [2], 'data': [1, True]}),
    'c_data_null.json': const({'shape': [2], 'data': [1, None]}),
    'c_data_object.json': const({'shape': [2], 'data': [1, {}]}),
    'c_data_bad_word.json': const({'shape': [1], 'data': ['infinity']}),
    'c_data_words.json': const({'shape': [3], 'data': ['NaN', '+inf', '-Infinity']}),
    'c_data_short.json': const({'shape': [3], 'data': [1, 2]}),
    'c_data_long.json': const({'shape': [1], 'data': [1, 2]}),
    'c_data_ragged.json': const({'shape': [2, 2], 'data': [[1, 2], [3]]}),
    'c_data_too_deep.json': const({'shape': [2], 'data': [[1], [2]]}),
    'c_file_number.json': const({'file': 3}),
    'c_file_empty.json': const({'file': ''}),
    'c_file_key_number.json': const({'file': 'x.npz', 'key': 5}),
    'c_file_missing.json': const({'file': 'no_such_file.npy'}),
    'c_file_bad_npy.json': const({'file': 'npy_bad_magic.npy'}),
    'c_file_npz_no_key.json': const({'file': 'z_good.npz'}),
    'c_file_npz_bad_key.json': const({'file': 'z_good.npz', 'key': 'nokey'}),
    'c_file_dir.json': const({'file': 'dir.npy'}),
    'c_file_extra_key.json': const({'file': 'z_good.npz', 'key': 'x', 'shape': [1]}),
    'c_file_outside.json': const({'file': '../x123.npy'}),
    'c_file_absolute.json': const({'file': '/dev/null.npy'}),
    'c_file_dotdot_inside.json': const({'file': 'dir.npy/../npy_good.npy'}),
    'nodes_object.json': graph(nodes={'y': {'op': 'neg', 'args': ['x']}}),
    'nodes_string.json': graph(nodes='y'),
    'nodes_null.json': graph(nodes=None),
    'nodes_number_entry.json': graph(nodes=[1]),
    'nodes_null_entry.json': graph(nodes=[None]),
    'nodes_array_entry.json': graph(nodes=[[{'id': 'y', 'op': 'neg', 'args': ['x']}]]),
    'out_number.json': graph(outputs=1),
    'out_empty.json': graph(outputs=[]),
    'out_number_entry.json': graph(outputs=[1]),
    'out_null.json': graph(outputs=None),
    'out_object.json': graph(outputs={'y': 1}),
    'out_nested.json': graph(outputs=[['y']]),
    'out_missing.json': graph(outputs=DROP),
    'out_empty_name.json': graph(outputs=''),
    'id_number.json': node(id=1, op='neg', args=['x']),
    'id_null.json': node(id=None, op='neg', args=['x']),
    'id_object.json': node(id={'y': 1}, op='neg', args=['x']),
    'id_empty_array.json': node(id=[], op='neg', args=['x']),
    'id_mixed_array.json': node(id=['y', 2], op='neg', args=['x']),
    'id_two_names.json': node(id=['y', 'z'], op='neg', args=['x']),
    'id_missing.json': graph(nodes=[{'op': 'neg', 'args': ['x']}]),
    'op_number.json': node(op=1, args=['x']),
    'op_null.json': node(op=None, args=['x']),
    'op_array.json': node(op=['neg'], args=['x']),
    'op_missing.json': node(args=['x']),
    'args_string.json': node(op='neg', args='x'),
    'args_object.json': node(op='neg', args={'x': 1}),
    'args_null.json': node(op='neg', args=None),
    'args_null_entry.json': node(op='neg', args=[None]),
    'args_bool_entry.json': node(op='neg', args=[True]),
    'args_array_entry.json': node(op='neg', args=[['x']]),
    'args_object_entry.json': node(op='neg', args=[{}]),
    'args_missing.json': node(op='neg'),
    'args_too_many.json': node(op='neg', args=['x', 'x']),
    'args_too_few.json': node(op='add', args=['x']),
    'args_none_concat.json': node(op='concat', args=[]),
    'attr_axes_string.json': node(op='sum', args=['x'], axes='0'),
    'attr_axes_float.json': node(op='sum', args=['x'], axes=[0.5]),
    'attr_axes_bool.json': node(op='sum', args=['x'], axes=True),
    'attr_axes_nested.json': node(op='sum', args=['x'], axes=[[0]]),
    'attr_axes_17.json': node(op='sum', args=['x'], axes=list(range(17))),
    'attr_keepdims_number.json': node(op='sum', args=['x'], keepdims=1),
    'attr_keepdims_string.json': node(op='sum', args=['x'], keepdims='true'),
    'attr_axis_string.json': node(op='softmax', args=['x'], axis='0'),
    'attr_axis_float.json': node(op='softmax', args=['x'], axis=0.5),
    'attr_axis_null.json': node(op='softmax', args=['x'], axis=None),
    'attr_approx_bad.json': node(op='gelu', args=['x'], approximate='exact'),
    'attr_approx_bool.json': node(op='gelu', args=['x'], approximate=True),
    'attr_min_string.json': node(op='clamp', args=['x'], min='low'),
    'attr_max_null.json': node(op='clamp', args=['x'], max=None),
    'attr_clamp_none.json': node(op='clamp', args=['x']),
    'attr_dtype_f16.json': node(op='cast', args=['x'], dtype='f16'),
    'attr_dtype_number.json': node(op='cast', args=['x'], dtype=32),
    'attr_dtype_missing.json': node(op='cast', args=['x']),
    'attr_shape_string.json': node(op='reshape', args=['x'], shape='2'),
    'attr_shape_float.json': node(op='reshape', args=['x'], shape=[2.5]),
    'attr_shape_scalar.json': node(op='reshape', args=['x'], shape=2),
    'attr_shape_missing.json': node(op='reshape', args=['x']),
    'attr_start_string.json': node(op='slice', args=['x'], start='1'),
    'attr_step_zero.json': node(op='slice', args=['x'], step=0),
    'attr_step_negative.json': node(op='slice', args=['x'], step=-1),
    'attr_step_float.json': node(op='slice', args=['x'], step=1.5),
    'attr_indices_string.json': node(op='take', args=['x'], axis=0, indices='0'),
    'attr_indices_float.json': node(op='take', args=['x'], axis=0, indices=[0.5]),
    'attr_indices_nested.json': node(op='take', args=['x'], axis=0, indices=[[0]]),
    'attr_indices_missing.json': node(op='take', args=['x'], axis=0),
    'attr_take_axis_missing.json': node(op='take', args=['x'], indices=[0]),
    'blk_then_string.json': with_cond(iff(then='x')),
    'blk_then_array.json': with_cond(iff(then=[])),
    'blk_then_null.json': with_cond(iff(then=None)),
    'blk_then_missing.json': with_cond({'id': 'r', 'op': 'if', 'cond': 'c', 'else': {'nodes': [], 'result': 'x'}}),
    'blk_nodes_missing.json': with_cond(iff(then={'result': 'x'})),
    'blk_nodes_object.json': with_cond(iff(then={'nodes': {}, 'result': 'x'})),
    'blk_result_missing.json': with_cond(iff(then={'nodes': []})),
    'blk_result_number.json': with_cond(iff(then={'nodes': [], 'result': 1})),
    'blk_result_empty.json': with_cond(iff(then={'nodes': [], 'result': []})),
    'blk_result_null_entry.json': with_cond(iff(then={'nodes': [], 'result': [None]})),
    'blk_result_count.json': with_cond(iff(then={'nodes': [], 'result': ['x', 'x']})),
    'blk_cond_array.json': with_cond(iff(cond=['c'])),
    'blk_cond_bool.json': with_cond(iff(cond=True)),
    'blk_cond_missing.json': with_cond({'id': 'r', 'op': 'if', 'then': {'nodes': [], 'result': 'x'}, 'else': {'nodes': [], 'result': 'x'}}),
    'blk_cond_not_scalar.json': nodes({'id': 'r', 'op': 'if', 'cond': 'x', 'then': {'nodes': [], 'result': 'x'}, 'else': {'nodes': [], 'result': 'x'}}, outputs='r'),
    'it_count_string.json': iterate(count='3'),
    'it_count_negative.json': iterate(count=-1),
    'it_count_float.json': iterate(count=1.5),
    'it_count_huge.json': iterate(count=1e300),
    'it_count_missing.json': iterate(count=DROP),
    'it_init_string.json': iterate(init='x'),
    'it_init_missing.json': iterate(init=DROP),
    'it_state_number.json': iterate(state=1),
    'it_state_count.json': iterate(state=['s', 't']),
    'it_index_number.json': iterate(index=1),
    'it_body_string.json': iterate(body='s1'),
    'it_body_missing.json': iterate(body=DROP),
    'it_result_count.json': iterate(body={'nodes': [], 'result': ['s', 's']}),
    'it_shape_change.json': iterate(body={'nodes': [{'id': 's1', 'op': 'stack', 'args': ['s', 's']}], 'result': 's1'}),
    'it_dtype_change.json': iterate(body={'nodes': [{'id': 's1', 'op': 'cast', 'args': ['s'], 'dtype': 'f32'}], 'result': 's1'}),
    'map_params_string.json': mapn(params='e'),
    'map_params_number.json': mapn(params=[1]),
    'map_params_count.json': mapn(params=['e', 'f']),
    'map_no_args.json': mapn(args=[], params=[]),
    'map_two_ids.json': nodes({'id': ['r', 'q'], 'op': 'map', 'args': ['x'], 'params': ['e'], 'body': {'nodes': [], 'result': 'e'}}, outputs='r'),
    'map_body_matmul.json': mapn(body={'nodes': [{'id': 'e2', 'op': 'matmul', 'args': ['e', 'e']}], 'result': 'e2'}),
    'map_body_sum.json': mapn(body={'nodes': [{'id': 'e2', 'op': 'sum', 'args': ['e']}], 'result': 'e2'}),
    'map_capture_tensor.json': mapn(body={'nodes': [{'id': 'e2', 'op': 'mul', 'args': ['e', 'x']}], 'result': 'e2'}),
    'map_body_result_count.json': mapn(body={'nodes': [], 'result': ['e', 'e']}),

    # --- unknown keys, ops, attributes --------------------------------------
    'k_top_case.json': graph(Version=1),
    'k_top_extra.json': graph(comment='hi'),
    'k_top_outputs_typo.json': '{"version": 1, "inputs": ["x"], "nodes": [' + NEG + '], "output": "y"}',
    'k_node_extra.json': node(op='neg', args=['x'], note='x'),
    'k_attr_wrong_op.json': node(op='neg', args=['x'], axes=[0]),
    'k_attr_typo.json': node(op='softmax', args=['x'], axes=0),
    'k_input_extra.json': graph(inputs=[{'name': 'x', 'size': 3}]),
    'k_const_extra.json': const({'shape': [], 'fill': 1, 'Shape': [1]}),
    'k_if_extra.json': with_cond(iff(body={'nodes': [], 'result': 'x'})),
    'k_iterate_extra.json': iterate(params=['s']),
    'k_map_extra.json': mapn(count=2),
    'k_block_extra.json': iterate(body={'nodes': [{'id': 's1', 'op': 'mul', 'args': ['s', 2]}], 'result': 's1', 'results': 's1'}),
    'k_op_case.json': node(op='Neg', args=['x']),
    'k_op_space.json': node(op='neg ', args=['x']),
    'k_op_empty.json': node(op='', args=['x']),
    'k_op_internal.json': node(op='slice_grad', args=['x']),
    'k_op_internal2.json': node(op='map_grad', args=['x', 'x']),
    'k_op_long.json': node(op='o' * 5000, args=['x']),

    # --- names --------------------------------------------------------------
    'n_empty_id.json': node(id='', op='neg', args=['x']),
    'n_dash.json': node(id='a-b', op='neg', args=['x']),
    'n_space.json': node(id='a b', op='neg', args=['x']),
    'n_dot.json': node(id='a.b', op='neg', args=['x']),
    'n_slash.json': node(id='grad/x', op='neg', args=['x']),
    'n_unicode.json': node(id='\u00e9', op='neg', args=['x']),
    'n_digit_input.json': graph(inputs=['1x'], nodes=[{'id': 'y', 'op': 'neg', 'args': ['1x']}]),
    'n_bad_const.json': nodes({'id': 'y', 'op': 'add', 'args': ['x', 'a b']}, consts={'a b': 1}),
    'n_bad_param.json': mapn(params=['1e']),
    'n_bad_state.json': iterate(state=['s-1']),
    'n_bad_index.json': iterate(index='i i'),
    'n_256.json': nodes({'id': 'n' * 256, 'op': 'neg', 'args': ['x']}, outputs='n' * 256),
    'n_255.json': nodes({'id': LONG255, 'op': 'neg', 'args': ['x']}, outputs=LONG255),
    'n_input_255.json': graph(inputs=[LONG255], nodes=[{'id': 'y', 'op': 'neg', 'args': [LONG255]}]),
    'n_huge_name.json': nodes({'id': 'n' * 10000, 'op': 'neg', 'args': ['x']}),
    'n_nan_arg.json': node(op='add', args=['x', 'nan']),

    # --- duplicate and forward references, cycles through blocks -------------
    'r_dup_input.json': graph(inputs=['x', 'x']),
    'r_input_const.json': nodes({'id': 'y', 'op': 'add', 'args': ['x', 'x']}, consts={'x': 1}),
    'r_const_node.json': nodes({'id': 'c', 'op': 'neg', 'args': ['x']}, {'id': 'y', 'op': 'neg', 'args': ['c']}, consts={'c': 1}),
    'r_node_input.json': nodes({'id': 'x', 'op': 'neg', 'args': ['x']}, outputs='x'),
    'r_multi_id_repeat.json': nodes({'id': ['r', 'r'], 'op': 'iterate', 'count': 1, 'init': ['x', 'x'],
                                     'state': ['s', 't'], 'body': {'nodes': [], 'result': ['s', 't']}}, outputs='r'),
    'r_self.json': node(op='neg', args=['y']),
    'r_forward.json': nodes({'id': 'y', 'op': 'add', 'args': ['x', 'z']}, {'id': 'z', 'op': 'neg', 'args': ['x']}),
    'r_unknown.json': node(op='neg', args=['nothere']),
    'r_output_unknown.json': graph(outputs='nothere'),
    'r_output_dup.json': graph(outputs=['y', 'y']),
    'r_output_block_local.json': with_cond(iff(then={'nodes': [{'id': 't', 'op': 'neg', 'args': ['x']}], 'result': 't'}), outputs='t'),
    'r_use_block_local.json': with_cond(iff(then={'nodes': [{'id': 't', 'op': 'neg', 'args': ['x']}], 'result': 't'}),
                                        {'id': 'y', 'op': 'neg', 'args': ['t']}, outputs='y'),
    'r_if_own_id.json': with_cond(iff(then={'nodes': [{'id': 't', 'op': 'neg', 'args': ['r']}], 'result': 't'})),
    'r_if_later_top.json': with_cond(iff(then={'nodes': [{'id': 't', 'op': 'neg', 'args': ['later']}], 'result': 't'}),
                                     {'id': 'later', 'op': 'neg', 'args': ['x']}, outputs='r'),
    'r_if_result_later.json': with_cond(iff(then={'nodes': [], 'result': 'later'}),
                                        {'id': 'later', 'op': 'neg', 'args': ['x']}, outputs='r'),
    'r_cond_later.json': nodes(iff(cond='c'), {'id': 'c', 'op': 'gt', 'args': ['x', 0]}, outputs='r'),
    'r_else_sees_then.json': with_cond(iff(then={'nodes': [{'id': 't', 'op': 'neg', 'args': ['x']}], 'result': 't'},
                                           els={'nodes': [], 'result': 't'})),
    'r_same_local_both.json': with_cond(iff(then={'nodes': [{'id': 't', 'op': 'neg', 'args': ['x']}], 'result': 't'},
                                            els={'nodes': [{'id': 't', 'op': 'exp', 'args': ['x']}], 'result': 't'})),
    'r_local_shadows_top.json': with_cond(iff(then={'nodes': [{'id': 'x', 'op': 'neg', 'args': ['c']}], 'result': 'x'})),
    'r_param_shadows_input.json': mapn(params=['x'], body={'nodes': [], 'result': 'x'}),
    'r_state_shadows_input.json': iterate(state=['x'], body={'nodes': [], 'result': 'x'}),
    'r_iterate_own_id.json': iterate(body={'nodes': [{'id': 's1', 'op': 'mul', 'args': ['s', 'r']}], 'result': 's1'}),
    'r_iterate_init_own_id.json': iterate(init=['r']),
    'r_iterate_body_later.json': nodes({'id': 'r', 'op': 'iterate', 'count': 2, 'init': ['x'], 'state': ['s'],
                                        'body': {'nodes': [{'id': 's1', 'op': 'mul', 'args': ['s', 'later']}], 'result': 's1'}},
                                       {'id': 'later', 'op': 'neg', 'args': ['x']}, outputs='r'),
    'r_map_own_id.json': mapn(body={'nodes': [{'id': 'e2', 'op': 'mul', 'args': ['e', 'r']}], 'result': 'e2'}),
    'r_nested_block_later.json': with_cond(iff(then={'nodes': [
        {'id': 'r2', 'op': 'if', 'cond': 'c', 'then': {'nodes': [{'id': 'u', 'op': 'neg', 'args': ['v']}], 'result': 'u'},
         'else': {'nodes': [], 'result': 'x'}},
        {'id': 'v', 'op': 'neg', 'args': ['x']}], 'result': 'r2'})),
    'r_index_outside.json': nodes({'id': 'r', 'op': 'iterate', 'count': 2, 'init': ['x'], 'state': ['s'], 'index': 'i',
                                   'body': {'nodes': [{'id': 's1', 'op': 'add', 'args': ['s', 'i']}], 'result': 's1'}},
                                  {'id': 'y', 'op': 'add', 'args': ['r', 'i']}, outputs='y'),

    # --- sizes ----------------------------------------------------------------
    's_const_overflow.json': const({'shape': [4294967296, 4294967296, 16], 'fill': 1}),
    's_const_overflow_data.json': const({'shape': [4294967296, 4294967296, 16], 'data': [1]}),
    's_const_2p62.json': const({'shape': [2147483648, 2147483648], 'fill': 1}),
    's_const_negative.json': const({'shape': [-1], 'fill': 1}),
    's_const_negative_pair.json': const({'shape': [-2, -2], 'fill': 1}),
    's_const_17dims.json': const({'shape': [1] * 17, 'fill': 1}),
    's_const_above_2p53.json': const({'shape': [1e17], 'fill': 1}),
    's_const_absurd_fill.json': const({'shape': [1 << 30, 1 << 30], 'fill': 1}),
    's_const_absurd_data.json': const({'shape': [1 << 40], 'data': [1]}),
    's_const_zero_huge.json': nodes({'id': 'y', 'op': 'sum', 'args': ['c']}, consts={'c': {'shape': [0, 1 << 50], 'fill': 1}}),
    's_reshape_overflow.json': node(op='reshape', args=['x'], shape=[4294967296, 4294967296, 16]),
    's_reshape_negative.json': node(op='reshape', args=['x'], shape=[-2]),
    's_reshape_two_infer.json': node(op='reshape', args=['x'], shape=[-1, -1]),
    's_reshape_zero_infer.json': node(op='reshape', args=['x'], shape=[0, -1]),
    's_reshape_mismatch.json': node(op='reshape', args=['x'], shape=[7]),
    's_bcast_overflow.json': node(op='broadcast_to', args=['x'], shape=[4294967296, 4294967296, 16]),
    's_bcast_negative.json': node(op='broadcast_to', args=['x'], shape=[-1]),
    's_bcast_17dims.json': node(op='broadcast_to', args=['x'], shape=[1] * 17),
    's_bcast_absurd.json': node(op='broadcast_to', args=['x'], shape=[1 << 30, 1 << 30]),
    's_bcast_incompatible.json': node(op='broadcast_to', args=['x'], shape=[2, 5]),
    's_expand_17.json': nodes({'id': 'b', 'op': 'reshape', 'args': ['x'], 'shape': [1] * 16},
                              {'id': 'y', 'op': 'expand_dims', 'args': ['b'], 'axis': 0}),
    's_stack_17.json': nodes({'id': 'b', 'op': 'reshape', 'args': ['x'], 'shape': [1] * 16},
                             {'id': 'y', 'op': 'stack', 'args': ['b', 'b'], 'axis': 0}),
    's_take_out_of_range.json': node(op='take', args=['x'], axis=0, indices=[3]),
    's_take_neg_out_of_range.json': node(op='take', args=['x'], axis=0, indices=[-4]),
    's_take_huge_index.json': node(op='take', args=['x'], axis=0, indices=[-9007199254740992]),
    's_take_above_2p53.json': node(op='take', args=['x'], axis=0, indices=[1e19]),
    's_slice_huge_bounds.json': node(op='slice', args=['x'], axis=0, start=-9007199254740992, stop=9007199254740992, step=9007199254740992),
    's_iterate_count_2p53.json': iterate(count=1e16),
    's_matmul_scalar.json': node(op='matmul', args=['x', 'x']),

    # --- axes -----------------------------------------------------------------
    'a_sum_axis_5.json': node(op='sum', args=['x'], axes=[5]),
    'a_sum_axis_neg.json': node(op='sum', args=['x'], axes=-2),
    'a_sum_axis_repeat.json': node(op='sum', args=['x'], axes=[0, 0]),
    'a_sum_axis_repeat_neg.json': node(op='sum', args=['x'], axes=[0, -1]),
    'a_sum_axis_2p53.json': node(op='sum', args=['x'], axes=[9007199254740992]),
    'a_softmax_axis.json': node(op='softmax', args=['x'], axis=3),
    'a_softmax_scalar.json': node(op='softmax', args=['x']),
    'a_concat_axis.json': node(op='concat', args=['x', 'x'], axis=2),
    'a_concat_scalar.json': node(op='concat', args=['x', 'x']),
    'a_stack_axis.json': node(op='stack', args=['x', 'x'], axis=3),
    'a_expand_axis.json': node(op='expand_dims', args=['x'], axis=5),
    'a_squeeze_non1.json': node(op='squeeze', args=['x'], axes=[0]),
    'a_squeeze_axis.json': node(op='squeeze', args=['x'], axes=[4]),
    'a_transpose_repeat.json': node(op='transpose', args=['x'], axes=[0, 0]),
    'a_transpose_count.json': node(op='transpose', args=['x'], axes=[0]),
    'a_take_axis.json': node(op='take', args=['x'], axis=9, indices=[0]),
    'a_slice_axis.json': node(op='slice', args=['x'], axis=-3),
    'a_max_empty_axis.json': nodes({'id': 'e', 'op': 'slice', 'args': ['x'], 'axis': 0, 'start': 0, 'stop': 0},
                                   {'id': 'y', 'op': 'max', 'args': ['e']}),

    # --- dtype mixes ------------------------------------------------------------
    'd_typed_const.json': const({'dtype': 'f32', 'shape': [], 'fill': 1}),
    'd_where.json': nodes({'id': 'h', 'op': 'cast', 'args': ['x'], 'dtype': 'f32'},
                          {'id': 'y', 'op': 'where', 'args': ['x', 'h', 'x']}),
    'd_concat.json': nodes({'id': 'h', 'op': 'cast', 'args': ['x'], 'dtype': 'f32'},
                           {'id': 'y', 'op': 'concat', 'args': ['x', 'h']}),
    'd_map.json': nodes({'id': 'h', 'op': 'cast', 'args': ['x'], 'dtype': 'f32'},
                        {'id': 'y', 'op': 'map', 'args': ['x', 'h'], 'params': ['a', 'b'],
                         'body': {'nodes': [{'id': 'ab', 'op': 'add', 'args': ['a', 'b']}], 'result': 'ab'}}),
    'd_two_inputs.json': nodes({'id': 'y', 'op': 'add', 'args': ['x', 'w']}, inputs=('x', 'w')),
    'd_declared_f64.json': graph(inputs=[{'name': 'x', 'dtype': 'f64'}]),
    'd_file_const_f32.json': const({'file': 'f32_scalar.npy'}),

    # --- index tensors (i32, i64) -------------------------------------------------
    # y = take(x, k, axis=0) with k an index input
    'i_take.json': nodes({'id': 'y', 'op': 'take', 'args': ['x', 'k'], 'axis': 0}, inputs=('x', 'k')),
    'i_take_both.json': nodes({'id': 'y', 'op': 'take', 'args': ['x', 'k'], 'axis': 0, 'indices': [0]},
                              inputs=('x', 'k')),
    'i_take_3args.json': nodes({'id': 'y', 'op': 'take', 'args': ['x', 'k', 'k'], 'axis': 0}, inputs=('x', 'k')),
    'i_take_noaxis.json': nodes({'id': 'y', 'op': 'take', 'args': ['x', 'k']}, inputs=('x', 'k')),
    'i_gather.json': nodes({'id': 'y', 'op': 'gather', 'args': ['x', 'k'], 'axis': 0}, inputs=('x', 'k')),
    'i_gather_noaxis.json': nodes({'id': 'y', 'op': 'gather', 'args': ['x', 'k']}, inputs=('x', 'k')),
    'i_gather_1arg.json': node(op='gather', args=['x'], axis=0),
    'i_onehot.json': nodes({'id': 'h', 'op': 'one_hot', 'args': ['k'], 'depth': 3},
                           {'id': 'y', 'op': 'mul', 'args': ['h', 'x']}, inputs=('x', 'k')),
    'i_onehot_nodepth.json': node(op='one_hot', args=['x']),
    'i_onehot_negdepth.json': node(op='one_hot', args=['x'], depth=-1),
    'i_onehot_strdepth.json': node(op='one_hot', args=['x'], depth='3'),
    'i_onehot_huge.json': nodes({'id': 'y', 'op': 'one_hot', 'args': ['k'], 'depth': 1 << 40}, inputs=('x', 'k')),
    'i_onehot_overflow.json': nodes({'id': 'y', 'op': 'one_hot', 'args': ['k'], 'depth': 1 << 62}, inputs=('x', 'k')),
    # an index tensor given to arithmetic, a reduction, where, an if, a map
    # (integer add and sum are integer arithmetic: pow and mean are not)
    'i_arith.json': nodes({'id': 'y', 'op': 'pow', 'args': ['k', 1]}, inputs=('x', 'k')),
    'i_sum.json': nodes({'id': 'y', 'op': 'mean', 'args': ['k']}, inputs=('x', 'k')),
    'i_where.json': nodes({'id': 'y', 'op': 'where', 'args': ['x', 'k', 'k']}, inputs=('x', 'k')),
    'i_if.json': nodes(iff(cond='k'), inputs=('x', 'k'), outputs='r'),
    'i_map.json': nodes({'id': 'y', 'op': 'map', 'args': ['k'], 'params': ['e'],
                         'body': {'nodes': [{'id': 'e2', 'op': 'mul', 'args': ['e', 'e']}], 'result': 'e2'}},
                        inputs=('x', 'k')),
    'i_concat_mixed.json': nodes({'id': 'y', 'op': 'concat', 'args': ['x', 'k'], 'axis': 0}, inputs=('x', 'k')),
    'i_declared.json': graph(inputs=['x', {'name': 'k', 'dtype': 'i64', 'shape': ['n']}],
                             nodes=[{'id': 'y', 'op': 'take', 'args': ['x', 'k'], 'axis': 0}]),
    # index constants: fractions, ranges, files
    'i_const_frac.json': nodes({'id': 'y', 'op': 'take', 'args': ['x', 'c'], 'axis': 0},
                               consts={'c': {'dtype': 'i64', 'shape': [2], 'data': [0, 1.5]}}),
    'i_const_i32_range.json': nodes({'id': 'y', 'op': 'take', 'args': ['x', 'c'], 'axis': 0},
                                    consts={'c': {'dtype': 'i32', 'shape': [1], 'data': [2147483648]}}),
    'i_const_big.json': nodes({'id': 'y', 'op': 'take', 'args': ['x', 'c'], 'axis': 0},
                              consts={'c': {'dtype': 'i64', 'shape': [1], 'data': [9007199254740993]}}),
    'i_const_nan.json': nodes({'id': 'y', 'op': 'take', 'args': ['x', 'c'], 'axis': 0},
                              consts={'c': {'dtype': 'i64', 'shape': [1], 'data': ['nan']}}),
    'i_const_fill.json': nodes({'id': 'y', 'op': 'take', 'args': ['x', 'c'], 'axis': 0},
                               consts={'c': {'dtype': 'i64', 'shape': [2], 'fill': 0.5}}),
    'i_const_file.json': nodes({'id': 'y', 'op': 'take', 'args': ['x', 'c'], 'axis': 0},
                               consts={'c': {'file': 'i_huge.npy'}}),
    'i_weak_frac.json': node(op='take', args=['x', 1.5], axis=0),
    'i_cast_dtype.json': node(op='cast', args=['x'], dtype='u8'),
}

# nested ifs, each one level deeper (valid; about 4 JSON levels each)
def nested_ifs(depth):
    inner = {'nodes': [{'id': 't%d' % depth, 'op': 'neg', 'args': ['x']}], 'result': 't%d' % depth}
    for d in range(depth - 1, -1, -1):
        inner = {'nodes': [{'id': 'r%d' % d, 'op': 'if', 'cond': 'c', 'then': inner,
                            'else': {'nodes': [], 'result': 'x'}}], 'result': 'r%d' % d}
    return nodes({'id': 'c', 'op': 'gt', 'args': ['x', 0]}, *inner['nodes'], outputs='r0')


GRAPHS['ok_nested_ifs_200.json'] = nested_ifs(200)
# many nodes: a chain of 4000 negations (an even number: y = x)
GRAPHS['ok_chain_4000.json'] = nodes(*([{'id': 'v0', 'op': 'neg', 'args': ['x']}] +
                                        [{'id': 'v%d' % i, 'op': 'neg', 'args': ['v%d' % (i - 1)]}
                                         for i in range(1, 4000)]), outputs='v3999')
# an object with 5000 keys, all unknown: one error, quickly
GRAPHS['k_many_keys.json'] = '{"version": 1, ' + ', '.join('"k%d": 0' % i for i in range(5000)) + \
    ', "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}'
# 5000 consts with the same name (the duplicate check must not be the slow part)
GRAPHS['j_dup_many.json'] = '{"version": 1, "consts": {' + ', '.join('"c": %d' % i for i in range(5000)) + \
    '}, "inputs": ["x"], "nodes": [' + NEG + '], "outputs": "y"}'


# ---------------------------------------------------------------------------
# .npy files
# ---------------------------------------------------------------------------

MAGIC = b'\x93NUMPY'


def npy(header, data=b'', version=(1, 0), hlen=None):
    """Magic, version, header length (hlen, or the real one), header, data.
    The header is padded to 64 bytes and ends in a newline, as NumPy does,
    unless hlen is given."""
    h = header.encode('latin-1') if isinstance(header, str) else header
    pre = 10 if version[0] == 1 else 12
    if hlen is None:
        h = h + b' ' * ((64 - (pre + len(h) + 1) % 64) % 64) + b'\n'
        hlen = len(h)
    fmt = '<H' if version[0] == 1 else '<I'
    return MAGIC + bytes(version) + struct.pack(fmt, hlen) + h + data


def f64(*vals):
    return struct.pack('<%dd' % len(vals), *vals)


def hdr(descr="'<f8'", fortran='False', shape='(3,)'):
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


X123 = f64(1, 2, 3)
GOOD_NPY = npy(hdr(), X123)

NPYS = {
    'npy_good.npy': GOOD_NPY,
    'f32_scalar.npy': npy(hdr("'<f4'", shape='()'), struct.pack('<f', 1.0)),
    'npy_empty.npy': b'',
    'npy_bad_magic.npy': b'\x93NUMPX' + GOOD_NPY[6:],
    'npy_magic_only.npy': MAGIC,
    'npy_no_header_len.npy': MAGIC + b'\x01\x00\x76',
    'npy_version_9.npy': npy(hdr(), X123, version=(9, 0)),
    'npy_version_1_1.npy': npy(hdr(), X123, version=(1, 1)),
    # header length says 60000; the file has about 150 bytes
    'npy_hlen_lie_long.npy': npy(hdr(), X123, hlen=60000),
    # version 2: a 32-bit header length of 4 GiB - 1
    'npy_hlen_lie_4g.npy': npy(hdr(), X123, version=(2, 0), hlen=0xFFFFFFFF),
    # header length 20: the dict is cut in the middle
    'npy_hlen_lie_short.npy': npy(hdr() + ' ' * 10 + '\n', X123, hlen=20),
    # header length 0
    'npy_hlen_zero.npy': npy(b'', X123, hlen=0),
    # a header that claims more data than the file has
    'npy_short_data.npy': npy(hdr(shape='(1000,)'), X123),
    'npy_huge_shape_data.npy': npy(hdr(shape='(1152921504606846976,)'), X123),
    'npy_no_data.npy': npy(hdr(shape='()')),
    'npy_trailing_data.npy': npy(hdr(), X123 + b'\0' * 8),
    'npy_half_element.npy': npy(hdr(), X123[:20]),
    # shape products that overflow 64 bits, negative and too many dims
    'npy_shape_overflow.npy': npy(hdr(shape='(4294967296, 4294967296, 16)'), X123),
    'npy_shape_int64_overflow.npy': npy(hdr(shape='(99999999999999999999999,)'), X123),
    'npy_shape_negative.npy': npy(hdr(shape='(-3,)'), X123),
    'npy_shape_neg_pair.npy': npy(hdr(shape='(-1, -3)'), X123),
    'npy_shape_17.npy': npy(hdr(shape='(' + '1, ' * 17 + ')'), f64(1)),
    'npy_shape_string.npy': npy(hdr(shape="('3',)"), X123),
    'npy_shape_float.npy': npy(hdr(shape='(3.0,)'), X123),
    'npy_shape_list.npy': npy(hdr(shape='[3]'), X123),
    'npy_shape_not_tuple.npy': npy(hdr(shape='3'), X123),
    # non-dict headers
    'npy_hdr_list.npy': npy("[('descr', '<f8'), ('fortran_order', False), ('shape', (3,))]", X123),
    'npy_hdr_string.npy': npy("'<f8'", X123),
    'npy_hdr_number.npy': npy('3', X123),
    'npy_hdr_empty_dict.npy': npy('{}', X123),
    'npy_hdr_unclosed.npy': npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), ", X123),
    'npy_hdr_garbage_after.npy': npy(hdr() + " junk", X123),
    'npy_hdr_extra_key.npy': npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'extra': 1, }", X123),
    'npy_hdr_dup_key.npy': npy("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", X123),
    'npy_hdr_no_shape.npy': npy("{'descr': '<f8', 'fortran_order': False, }", X123),
    'npy_hdr_no_descr.npy': npy("{'fortran_order': False, 'shape': (3,), }", X123),
    'npy_hdr_fortran_str.npy': npy(hdr(fortran="'no'"), X123),
    'npy_hdr_fortran_int.npy': npy(hdr(fortran='0'), X123),
    'npy_hdr_nul.npy': npy(hdr().replace("'<f8'", "'<f8\0'"), X123),
    'npy_hdr_escape.npy': npy(hdr(descr="'<f\\x38'"), X123),
    'npy_hdr_non_ascii.npy': npy(hdr(descr="'<f8\xe9'"), X123),
    'npy_hdr_long_descr.npy': npy(hdr(descr="'" + 'f' * 5000 + "'"), X123),
    # unsupported dtypes not among tests/fixtures/npy/bad_*.npy
    'npy_dtype_V8.npy': npy(hdr(descr="'|V8'"), X123),
    'npy_dtype_M8.npy': npy(hdr(descr="'<M8[ns]'"), X123),
    'npy_dtype_f16.npy': npy(hdr(descr="'<f16'"), X123 + X123),
    'npy_dtype_number.npy': npy(hdr(descr='8'), X123),
    'npy_dtype_empty.npy': npy(hdr(descr="''"), X123),
    'npy_dtype_struct_dict.npy': npy(hdr(descr="{'names': ['a'], 'formats': ['<f8']}"), X123),
    # big data claims in a tiny Fortran-order file
    'npy_fortran_short.npy': npy(hdr(fortran='True', shape='(1000, 1000)'), X123),
    # index tensors that lie about their size
    'i_huge.npy': npy(hdr(descr="'<i8'", shape='(1099511627776,)'), struct.pack('<q', 0)),
    'i_trailing.npy': npy(hdr(descr="'>i4'", shape='(2,)'), struct.pack('>3i', 0, 1, 2)),
    'i_fortran_short.npy': npy(hdr(descr="'<i8'", fortran='True', shape='(1000, 1000)'), struct.pack('<q', 0)),
    'i_u2.npy': npy(hdr(descr="'<u2'"), struct.pack('<3H', 0, 1, 2)),
}


# ---------------------------------------------------------------------------
# .npz files (written by hand: every field is under our control)
# ---------------------------------------------------------------------------

def zip_archive(members, cd_offset_delta=0, cd_offset=None, eocd_count=None, cd_size=None,
                comment=b''):
    """members: dicts with name (bytes), data (the stored/deflated bytes),
    and optional crc, usize, method, flags, local_name, local_offset.
    Returns the archive bytes."""
    out = b''
    central = b''
    for m in members:
        name = m['name']
        data = m['data']
        method = m.get('method', 0)
        crc = m.get('crc', zlib.crc32(m.get('plain', data)) & 0xFFFFFFFF)
        usize = m.get('usize', len(m.get('plain', data)))
        csize = m.get('csize', len(data))
        flags = m.get('flags', 0)
        off = len(out)
        lname = m.get('local_name', name)
        out += struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, flags, method, 0, 0x21, crc, csize, usize,
                           len(lname), 0) + lname + data
        central += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, flags, method, 0, 0x21, crc,
                               csize, usize, len(name), 0, 0, 0, 0, 0,
                               m.get('local_offset', off)) + name
    cd_off = len(out)
    n = len(members) if eocd_count is None else eocd_count
    out += central
    out += struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, n, n,
                       len(central) if cd_size is None else cd_size,
                       (cd_off + cd_offset_delta) if cd_offset is None else cd_offset,
                       len(comment)) + comment
    return out


def deflate(b, level=9):
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(b) + c.flush()


XNPY = GOOD_NPY                        # x = [1, 2, 3]
SEED3 = npy(hdr(), f64(1, 1, 1))
good = zip_archive([{'name': b'x.npy', 'data': XNPY}])
bomb_plain = npy(hdr(shape='(131072,)'), b'\0' * (131072 * 8))
bomb = deflate(bomb_plain)
bad_crc = bytearray(good)
bad_crc[good.index(b'\x93NUMPY') + len(XNPY) - 1] ^= 0x40  # flip a bit of the last value

NPZS = {
    'z_good.npz': good,
    'z_truncated_half.npz': good[:len(good) // 2],
    'z_truncated_tail.npz': good[:-1],
    'z_truncated_member.npz': good[:40],
    'z_empty_file.npz': b'',
    'z_bad_crc.npz': bytes(bad_crc),
    'z_crc_field.npz': zip_archive([{'name': b'x.npy', 'data': XNPY, 'crc': 0x12345678}]),
    # a deflated member that inflates to 1 MiB but declares 128 bytes
    'z_bomb.npz': zip_archive([{'name': b'x.npy', 'data': bomb, 'method': 8, 'usize': 128,
                                'plain': bomb_plain, 'crc': zlib.crc32(bomb_plain[:128])}]),
    # one that declares what it inflates to, honestly: 1 MiB from about 1 KiB
    'z_honest_bomb.npz': zip_archive([{'name': b'x.npy', 'data': bomb, 'method': 8, 'plain': bomb_plain}]),
    # one that declares 4 GiB - 1 from a few hundred bytes
    'z_bomb_declared.npz': zip_archive([{'name': b'x.npy', 'data': bomb, 'method': 8, 'usize': 0xFFFFFFFF,
                                         'plain': bomb_plain}]),
    # deflated, declared size larger than what it inflates to
    'z_inflate_short.npz': zip_archive([{'name': b'x.npy', 'data': deflate(XNPY), 'method': 8,
                                         'usize': len(XNPY) + 10, 'plain': XNPY}]),
    'z_deflate_corrupt.npz': zip_archive([{'name': b'x.npy', 'data': b'\xff' * 40, 'method': 8,
                                           'plain': XNPY}]),
    'z_deflate_truncated.npz': zip_archive([{'name': b'x.npy', 'data': deflate(XNPY)[:20], 'method': 8,
                                             'plain': XNPY}]),
    # the central directory points outside the file, or into the member
    'z_cd_outside.npz': zip_archive([{'name': b'x.npy', 'data': XNPY}], cd_offset=0x7FFFFFF0),
    'z_cd_into_member.npz': zip_archive([{'name': b'x.npy', 'data': XNPY}], cd_offset=30),
    'z_cd_size_huge.npz': zip_archive([{'name': b'x.npy', 'data': XNPY}], cd_size=0xFFFFFF00),
    'z_cd_count_lie.npz': zip_archive([{'name': b'x.npy', 'data': XNPY}], eocd_count=1000),
    # the member's local header offset points outside the file / elsewhere
    'z_local_outside.npz': zip_archive([{'name': b'x.npy', 'data': XNPY, 'local_offset': 0x7FFFFFF0}]),
    'z_local_wrong.npz': zip_archive([{'name': b'x.npy', 'data': XNPY, 'local_offset': 7}]),
    'z_local_name_differs.npz': zip_archive([{'name': b'x.npy', 'data': XNPY, 'local_name': b'y.npy'}]),
    'z_csize_past_end.npz': zip_archive([{'name': b'x.npy', 'data': XNPY, 'csize': 100000, 'usize': 100000}]),
    'z_stored_size_mismatch.npz': zip_archive([{'name': b'x.npy', 'data': XNPY, 'usize': len(XNPY) + 8}]),
    'z_method_bzip2.npz': zip_archive([{'name': b'x.npy', 'data': XNPY, 'method': 12}]),
    'z_encrypted.npz': zip_archive([{'name': b'x.npy', 'data': XNPY, 'flags': 1}]),
    'z_dup_member.npz': zip_archive([{'name': b'x.npy', 'data': XNPY}, {'name': b'x.npy', 'data': XNPY}]),
    'z_nul_in_name.npz': zip_archive([{'name': b'x\0.npy', 'data': XNPY}]),
    # a key with a newline and a terminal escape sequence (echoed when a key is missing)
    'z_key_newline.npz': zip_archive([{'name': b'a\nb\x1b[31m.npy', 'data': XNPY}]),
    'z_member_not_npy.npz': zip_archive([{'name': b'x.npy', 'data': b'hello, world\n'}]),
    'z_member_int.npz': zip_archive([{'name': b'x.npy', 'data': npy(hdr(descr="'<u8'"), X123)}]),
    'z_member_short_data.npz': zip_archive([{'name': b'x.npy', 'data': npy(hdr(shape='(1000,)'), X123)}]),
    'z_empty_archive.npz': zip_archive([]),
    'z_no_x.npz': zip_archive([{'name': b'w.npy', 'data': XNPY}]),
    'z_seed_s.npz': zip_archive([{'name': b's.npy', 'data': npy(hdr(shape='()'), f64(1))}]),
    'z_eocd_only_garbage.npz': b'PK\x05\x06' + b'\xff' * 18,
    'z_comment_lie.npz': good[:-2] + struct.pack('<H', 500),
    'z_zip64_locator_outside.npz': (lambda a: a[:-22] + struct.pack('<IIQI', 0x07064b50, 0, 0x7FFFFFFFFFFF, 1) + a[-22:])(good),
    'z_multidisk.npz': (lambda a: a[:-18] + struct.pack('<H', 1) + a[-16:])(good),
}


def main():
    for name, text in GRAPHS.items():
        write(name, text)
    for name, data in NPYS.items():
        write(name, data)
    for name, data in NPZS.items():
        write(name, data)
    # a folder named like a tensor file
    os.makedirs(path('dir.npy'), exist_ok=True)
    keep = os.path.join(path('dir.npy'), '.keep')
    if not os.path.exists(keep):
        write(os.path.join('dir.npy', '.keep'), '')
    print('wrote %d graphs, %d .npy and %d .npz files in %s' % (len(GRAPHS), len(NPYS), len(NPZS), HERE))


if __name__ == '__main__':
    main()
