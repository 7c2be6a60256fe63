#!/usr/bin/env python3
"""Regenerates the seed corpora in tests/fuzz/corpus/ from tests/fixtures/.

fuzz_sse, fuzz_xform, fuzz_anthropic, fuzz_responses, fuzz_gemini and fuzz_cohere read two header bytes before the stream (see
fuzz_common.h): byte 0 seeds the read sizes (bits 6-7: largest read 1, 7,
61 or 1021 bytes), byte 1 holds the target's flags. fuzz_json and fuzz_embedding read
plain JSON (fuzz_embedding: an embeddings answer, also used as request text). fuzz_dialect_req reads one flags byte (dialect, default model, small
max_doc_bytes, tools, bedrock's tool config or bedrock-kb's session, cohere's citation mode: see
fuzz_dialect_req.c), then a request body.
fuzz_alias reads one mode byte, then a request body or tool contents (ALIAS_SEEDS).
Run from anywhere: python3 tests/fuzz/make_corpus.py
"""
import json
import pathlib
import struct
import zlib

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"

# fuzz_sse byte 1 & 3: max_event 8, 64, 4096, 1 MiB.
SSE_CAP_64, SSE_CAP_4K, SSE_CAP_1M = 1, 2, 3
# fuzz_xform byte 1: request (bits 0-1), style (2-3), small max_event (4); bit 7 picks
# another profile by bits 5-6.
XF_DEFAULT, XF_NO_REQ, XF_DATA_SOURCES, XF_DOC, XF_NUMERIC, XF_SMALL_EVENT = 0, 1, 2, 4, 8, 16
XF_MARKDOWN = 0x80 | 0x60
XF_CITATION = 12
XF_OPENAI, XF_WEBCHAT = 0x80, 0xA0

SSE_SEEDS = {
    "crlf_split": (0x00, SSE_CAP_1M, b"data: a\r\n\r\ndata: b\r\n\r\n"),
    "bom": (0x40, SSE_CAP_1M, b"\xef\xbb\xbfdata: x\n\n"),
    "bom_only_line": (0x00, SSE_CAP_1M, b"\xef\xbb\xbf\r\ndata: x\n\n"),
    "multiline_data": (0x41, SSE_CAP_4K, b'data: {"a":\ndata: 1}\n\ndata\ndata:\n\n'),
    "comments": (0x80, SSE_CAP_4K, b": keep-alive\n\n: ping\r\rdata: x\r\r"),
    "fields": (0x43, SSE_CAP_4K,
               b"event: ping\nid: 7\nretry: 100\nid: a\x00b\ndata:  two spaces\nfoo\n\n"),
    "cr_only": (0x01, SSE_CAP_1M, b"data: x\rdata: y\r\r\r"),
    "toobig": (0x80, SSE_CAP_64, b"data: " + b"x" * 100 + b"\n\ndata: y\n\n"),
    "toobig_buffered": (0x40, SSE_CAP_64, b"data: a\n" + b"data: " + b"b" * 80 + b"\n\n"),
    "cap_with_lead": (0x05, SSE_CAP_64, b"data: a\r\n\r\ndata: " + b"c" * 54 + b"\r\n\r\n"),
    "unterminated": (0x42, SSE_CAP_4K, b"data: {\"choices\":[]}\n\ndata: {\"cho"),
    "oversized_between": (0x41, SSE_CAP_64, b"data: a\r\n\r\n: " + b"o" * 90 + b"\r\n\r\ndata: b\n\n"
                          + b"data: " + b"p" * 70 + b"\r\rdata: c\r\r"),
    "oversized_edge": (0x00, SSE_CAP_64, b"data: a\r\n\r\ndata: " + b"e" * 55 + b"\r\n\r\n"
                       + b"data: " + b"f" * 56 + b"\r\n\r\ndata: g\n\n"),
}

JSON_SEEDS = {
    "escapes": '{"a":"\\u00e9\\ud83d\\ude00\\n\\t\\\\\\"\\/","b":"\\ud800","c":"\\udc00x"}',
    "primitives": "[1,-2.5e3,true,false,null,\"x\",0.0,[],{}]",
    "duplicate_keys": '{"a":{"b":[{}]},"a":2,"":{"":""}}',
    "whitespace": ' \r\n\t{ "k" : [ 1 , 2 ] }\n ',
    "deep": "[" * 40 + "]" * 40,
}

# fuzz_dialect_req byte 0: dialect (bits 0-1), default model (2), small max_doc_bytes (3).
DR_ANTHROPIC, DR_RESPONSES, DR_OPENAI, DR_MODEL, DR_SMALL_DOCS = 0, 1, 2, 4, 8
DR_GEMINI, DR_VERTEX, DR_TOOLS = 16, 17, 2  # DR_TOOLS only with DR_GEMINI / DR_VERTEX
# DR_EXTRA (the bit of DR_TOOLS): bedrock's tool config, bedrock-kb's client session id.
DR_BEDROCK, DR_BEDROCK_KB, DR_EXTRA = 32, 33, 2
# cohere, its CITEGATE_COHERE_CITATIONS in bits 0-1 (0: fast).
DR_COHERE, DR_ACCURATE, DR_OFF = 64, 1, 2

DIALECT_SEEDS = {
    "escaped_roles": (DR_ANTHROPIC,
                      b'{"messages":[{"r\\u006fle":"x","role":"us\\u0065r","content":"\\ud800\\/"},'
                      b'{"role":"\\u0061ssistant","content":[{"type":"t\\u0065xt","text":"a"}]}]}'),
    "sources_no_user": (DR_ANTHROPIC | DR_SMALL_DOCS,
                        b'{"messages":[{"role":"system","content":"<source id=\\"2\\">'
                        b'two</source><source id=\\"1\\" name=\\"https://a.example/x\\">'
                        b'one</source>"},{"role":"assistant","content":"a"}]}'),
    "sources_empty_last": (DR_ANTHROPIC | DR_MODEL,
                           b'{"messages":[{"role":"user","content":[{"type":"text","text":'
                           b'"<source id=\\"7\\">seven</source>"}]},{"role":"user","content":null}]}'),
    "duplicate_keys": (DR_RESPONSES,
                       b'{"messages":[{"role":"user","content":"a"}],"tools":null,"tools":[{}],'
                       b'"stream":false,"stream":true,"max_tokens":1,"max_tokens":"x"}'),
    "stop_list": (DR_ANTHROPIC,
                  b'{"messages":[{"role":"user","content":"a"}],"stop":["x","\\u2028"],'
                  b'"max_completion_tokens":null,"max_tokens":5,"temperature":0,"top_p":1e-3}'),
    "part_types": (DR_RESPONSES,
                   b'{"messages":[{"role":"user","content":[{"type":"text","text":"a"},'
                   b'{"type":"input_audio","input_audio":{}}]}]}'),
    "tool_round": (DR_OPENAI,
                   b'{"messages":[{"role":"assistant","tool_calls":[{"id":"c"}]},'
                   b'{"role":"tool","content":"r"}],"n":2}'),
    # bedrock: file parts and <source> tags as documents, turns of one role merged, an ARN
    "bedrock_files_merged": (DR_BEDROCK | DR_EXTRA,
                             b'{"model":"arn:aws:bedrock:eu-west-3:1:inference-profile/eu.amazon.nova-pro-v1:0",'
                             b'"messages":[{"role":"developer","content":"Be brief."},'
                             b'{"role":"user","content":[{"type":"file","file":{"filename":"a.PDF",'
                             b'"file_data":"data:application/pdf;base64,JVBERi0x"}},{"type":"text","text":""}]},'
                             b'{"role":"user","content":"<source id=\\"3\\">three</source>'
                             b'<source id=\\"1\\">one</source>"},{"role":"assistant","content":""},'
                             b'{"role":"user","content":[{"type":"text","text":"q"},{"type":"file","file":'
                             b'{"filename":"n.md","file_data":"data:text/markdown;base64,"}}]}],'
                             b'"max_tokens":9,"stop":"x"}'),
    "bedrock_bad_model": (DR_BEDROCK, b'{"model":"a/../b","messages":[{"role":"user","content":"q"}]}'),
    # bedrock-kb: the last user message's text parts, escaped, before an assistant message
    "kb_last_user_parts": (DR_BEDROCK_KB | DR_EXTRA,
                           b'{"messages":[{"role":"user","content":"first"},{"role":"us\\u0065r","content":'
                           b'[{"type":"t\\u0065xt","text":"How \\"do\\" "},{"type":"text","text":'
                           b'"I charge \\u00e9\\ud800?"}]},{"role":"assistant","content":"later"}],'
                           b'"stream":true}'),
    "kb_no_user": (DR_BEDROCK_KB, b'{"messages":[{"role":"system","content":"s"},'
                                  b'{"role":"assistant","content":"a"}]}'),
    # bedrock-kb: a last user message without text after one with text (refused: no question)
    "kb_empty_question": (DR_BEDROCK_KB | DR_EXTRA,
                          b'{"messages":[{"role":"user","content":"first"},{"role":"user","content":'
                          b'[{"type":"text","text":""}]},{"role":"assistant","content":"a"}]}'),
    "kb_null_question": (DR_BEDROCK_KB, b'{"messages":[{"role":"user","content":"first"},'
                                        b'{"role":"user","content":null}]}'),
    # cohere: system and developer texts (an empty one left out), escaped roles and model,
    # text parts joined, a null content, every kept member
    "cohere_roles": (DR_COHERE | DR_ACCURATE,
                     b'{"model":"c\\u00e9\\u0000\\ud800","messages":[{"role":"system","content":""},'
                     b'{"role":"d\\u0065veloper","content":[{"type":"text","text":"Be "},{"type":"text",'
                     b'"text":"brief."}]},{"role":"us\\u0065r","content":"q \\"1\\""},{"role":"assistant",'
                     b'"content":null},{"role":"user","content":[]},{"role":"system","content":null}],'
                     b'"stream":false,"max_completion_tokens":null,"max_tokens":7,"temperature":1.5e0,'
                     b'"top_p":0,"stop":"\\n\\u2028x"}'),
    # cohere: <source> tags cut for the client (small max_doc_bytes) but sent whole, one empty,
    # one twice, a title and a url; a stop list; no citation_options
    "cohere_sources_cut": (DR_COHERE | DR_OFF | DR_SMALL_DOCS,
                           b'{"messages":[{"role":"system","content":"<source id=\\"12\\" name=\\"a/b.md\\">'
                           b'twelve, longer than sixteen bytes \\u00e9</source><source id=\\"2\\"></source>"},'
                           b'{"role":"user","content":[{"type":"text","text":"<source id=\\"3\\" name=\\"'
                           b'https://a.example/x?y=1\\">three</source><source id=\\"12\\">again</source>q"}]}],'
                           b'"stop":["a","\\ud83d\\ude00",""],"max_completion_tokens":3,"max_tokens":9,'
                           b'"stream":true}'),
    # cohere: <source> tags without a user message: no documents; the deployment names the model
    "cohere_no_user_sources": (DR_COHERE | DR_MODEL,
                               b'{"messages":[{"role":"developer","content":"<source id=\\"1\\">one</source>"},'
                               b'{"role":"assistant","content":"a"}],"model":null}'),
}

XFORM_SEEDS = {
    "split_ref": (0x00, XF_DEFAULT,
                  b'data: {"choices":[{"index":0,"delta":{"content":"see [1"}}]}\n\n'
                  b'data: {"choices":[{"index":0,"delta":{"content":"] and [2]"},'
                  b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'),
    "multiline_chunk": (0x40, XF_NO_REQ,
                        b'data: {"choices":[{"index":1,\ndata: "delta":{"content":"[doc1]"}}],\n'
                        b'data: "event":{"x":1}}\n\n'),
    "passthrough": (0x80, XF_SMALL_EVENT,
                    b'data: {"choices":[{"delta":{"content":"a [1"}}]}\n\n'
                    b'data: {"choices":[{"delta":{"content":"' + b"z" * 5000 + b'"}}]}\n\n'
                    b"data: [DONE]\n\n"),
    "event_keys": (0x41, XF_DEFAULT,
                   b'data: {"\\u0065vent":{"type":"source"},"choices":[{"delta":{"content":"a [1]"}}],'
                   b'"event":1,"ev\\u0065nt":2}\n\n'
                   b'data: {"event":1,"\\u0065\\u0076\\u0065\\u006e\\u0074":2,"choices":[]}\r\n\r\n'
                   b'data: {"choices":[{"delta":{"content":"b"}}],"\\u0065vent":3}\n\n'
                   b'data: {"choices":[{"delta":{"content":"c"}}],"\\u0065vent":3}\n\n'
                   b'data: [DONE]\n\ndata: {"\\u0065vent":4}\n\n'),
    "event_keys_body": (0x00, XF_NO_REQ,
                        b'{"\\u0065vent":1,"choices":[{"index":0,"message":{"content":"x [1]"}}],'
                        b'"event":2,"ev\\u0065nt":{"a":[]}}'),
    "oversized_between": (0x07, XF_SMALL_EVENT,
                          b'data: {"choices":[{"delta":{"content":"a [1] b [1"}}]}\r\n\r\n'
                          b'data: {"choices":[{"delta":{"content":"' + b"y" * 600
                          + b'"}}],"\\u0065vent":1}\r\n\r\n'
                          b'data: {"choices":[{"delta":{"content":"] c [1]"}}]}\r\n\r\n'
                          b': ' + b"k" * 700 + b'\n\n'
                          b'data: {"choices":[{"delta":{"content":"d"},"finish_reason":"stop"}]}\n\n'
                          b"data: [DONE]\n\n"),
    "oversized_edge": (0x41, XF_SMALL_EVENT | XF_DOC,
                       b'data: {"choices":[{"delta":{"content":"[doc1] ' + b"e" * 458 + b'"}}]}\r\n\r\n'
                       b'data: {"choices":[{"delta":{"content":"[doc1] ' + b"f" * 459 + b'"}}]}\r\n\r\n'),
    "oversized_truncated": (0x80, XF_SMALL_EVENT,
                            b'data: {"choices":[{"delta":{"content":"x [1"}}]}\n\n'
                            b'data: {"choices":[{"delta":{"content":"' + b"t" * 700),
    "markdown_stream": (0x41, XF_MARKDOWN | XF_DATA_SOURCES,
                        b'data: {"choices":[{"index":0,"delta":{"content":"early [doc2] "}}]}\n\n'
                        b'data: {"choices":[{"index":0,"delta":{"context":{"citations":['
                        b'{"title":"a\\\\b`c*d_e[f]g<h>","url":"https://e.example/a b(c)"},'
                        b'{"title":"T"}]}}},{"index":1,"delta":{"content":"[doc1][doc2]"}}]}\n\n'
                        b'data: {"choices":[{"index":0,"delta":{"content":"[doc2][do"}}]}\n\n'
                        b'data: {"choices":[{"index":0,"delta":{"content":"c1]"},'
                        b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'),
    "markdown_truncated": (0x07, XF_MARKDOWN,
                           b'data: {"citations":["https://p.example/1"],"choices":[{"index":0,'
                           b'"delta":{"content":"x [1][1"}}]}\n\ndata: {"choices":[{"index":0,'),
    "annotations_then_refs": (0x41, XF_NO_REQ | XF_WEBCHAT,
                              b'data: {"choices":[{"index":0,"delta":{"content":"a [1","annotations":['
                              b'{"type":"url_citation","url_citation":{"url":"https://a.example/1",'
                              b'"title":"A","content":"s"}},{"type":"url_citation","url":"https://b.example/",'
                              b'"title":"flat"},{"type":"url_citation","url_citation":{"url":"https://a.example/1"}}]}}]}\n\n'
                              b'data: {"choices":[{"index":1,"delta":{"annotations":[{"type":"url_citation",'
                              b'"url_citation":{"url":"https://c.example/"}}]}}]}\n\n'
                              b'data: {"choices":[{"index":0,"delta":{"content":"][2][3]"},'
                              b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'),
    "annotations_body": (0x00, XF_NO_REQ | XF_OPENAI,
                         b'{"choices":[{"index":0,"message":{"content":"x [1]","annotations":['
                         b'{"type":"url_citation","url_citation":{"url":"https://a.example/ a",'
                         b'"title":"T","start_index":0,"end_index":1}},{"type":"file_citation"}]}}]}'),
    "citation_auto": (0x80, XF_NO_REQ,
                      b'data: {"citations":["https://a.example/1","b"],"choices":[{"index":0,"delta":'
                      b'{"content":"[cita"}}]}\n\ndata: {"choices":[{"index":0,"delta":{"content":'
                      b'"tion:1][1][citation:2][citation:12345]"},"finish_reason":"stop"}]}\n\n'),
    "citation_fixed": (0x43, XF_NO_REQ | XF_CITATION,
                       b'data: {"search_results":[{"url":"https://a.example/1","title":"A"}],'
                       b'"choices":[{"index":0,"delta":{"content":"[citation:1][citation:0001][doc1][1]"}}]}\n\n'),
    "body": (0x00, XF_DATA_SOURCES,
             b'{"choices":[{"index":0,"message":{"content":"x [doc1]","context":'
             b'{"citations":[{"title":"T","url":"https://e.example/a b","content":"c"}]}},'
             b'"finish_reason":"stop"}],"event":{"type":"x"}}'),
}


# fuzz_anthropic byte 1: request (bits 0-1: sources, none, include_usage, both), profile
# (bits 2-4: openwebui, openai, webchat, structured, off), small max_event (5), max_doc_bytes 16 (6).
AN_SOURCES, AN_NO_REQ, AN_USAGE, AN_BOTH = 0, 1, 2, 3
AN_OPENAI, AN_WEBCHAT, AN_STRUCTURED, AN_OFF = 1 << 2, 2 << 2, 3 << 2, 4 << 2
AN_SMALL_EVENT, AN_SMALL_DOCS = 32, 64

AN_START = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
            b'"type":"message","model":"claude-x","usage":{"input_tokens":3,"output_tokens":1}}}\n\n')
AN_TEXT = b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"%s"}}\n\n'
ANTHROPIC_SEEDS = {
    "template_then_broken": (0x40, AN_NO_REQ, AN_START + AN_TEXT % b"a" + AN_TEXT % b'b\\'
                             + AN_TEXT % b"c\x00d" + AN_TEXT % b"e\\u00e"
                             + b'data: {"type":"message_stop"}\n\n'),
    "multiline_data": (0x41, AN_USAGE, AN_START + b'data: {"type":"content_block_delta",\ndata: '
                       b'"delta":{"type":"text_delta","text":"x\ndata: y"}}\n\n'
                       b'data: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},'
                       b'"usage":{"output_tokens":2}}\n\n'),
    "oversized_text": (0x80, AN_SMALL_EVENT | AN_OPENAI, AN_START + AN_TEXT % (b"x" * 600)
                       + AN_TEXT % b"[1]" + b'data: {"type":"message_stop"}\n\n'),
    "citations_every_key": (0xC0, AN_BOTH | AN_WEBCHAT,
                            AN_START + b'data: {"type":"content_block_start","index":0,"content_block":'
                            b'{"type":"text","text":"t","citations":[{"document_index":2,"cited_text":"c"},'
                            b'{"search_result_index":0,"source":"https://s.example","title":"S"},'
                            b'{"url":"https:\\/\\/w.example","title":null},{"document_index":7},{}]}}\n\n'
                            b'data: {"type":"content_block_stop","index":0}\n\n'
                            b'data: {"type":"error","error":{"type":"api_error","message":"x"}}\n\n'),
    "body_error": (0x00, AN_NO_REQ, b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'),
}


# fuzz_responses byte 1: profile (bits 0-2: openwebui, openai, webchat, structured, off),
# include_usage (3), small max_event (4).
RS_OPENWEBUI, RS_OPENAI, RS_WEBCHAT, RS_STRUCTURED, RS_OFF, RS_USAGE, RS_SMALL_EVENT = \
    0, 1, 2, 3, 4, 8, 16


def rs_delta(text, out=0, content=0):
    return (b'data: {"type":"response.output_text.delta","output_index":%d,"content_index":%d,'
            b'"delta":"%s"}\n\n' % (out, content, text))


def rs_url(start, end, url=b"https://a.example/x", out=0):
    return (b'data: {"type":"response.output_text.annotation.added","output_index":%d,'
            b'"content_index":0,"annotation":{"type":"url_citation","start_index":%d,'
            b'"end_index":%d,"url":"%s","title":"T"}}\n\n' % (out, start, end, url))


RS_CREATED = b'data: {"type":"response.created","response":{"id":"r","model":"m"}}\n\n'
RS_COMPLETED = (b'data: {"type":"response.completed","response":{"status":"completed",'
                b'"usage":{"input_tokens":1,"output_tokens":2}}}\n\n')

RESPONSES_SEEDS = {
    "marker_split_lead": (0x41, RS_OPENWEBUI,
                          RS_CREATED + rs_delta(b"a\xe3\x80") + rs_delta(b"\x901\xe2\x80\xa0x\xe3")
                          + rs_delta(b"\x80\x91 b") + rs_url(1, 6) + RS_COMPLETED),
    "marker_run": (0x07, RS_OPENAI,
                   RS_CREATED + rs_delta("\u3010" "1\u2020x\u3011y\u3010" "2\u2020x\u3011z".encode())
                   + rs_url(6, 11, b"https://b.example/") + rs_url(0, 5) + RS_COMPLETED),
    "marker_escaped": (0x80, RS_WEBCHAT | RS_USAGE,
                       RS_CREATED + rs_delta(b"q\\u3010" b"4:0\\u2020s\\u3011\\ud83d\\ude00")
                       + rs_url(1, 7) + RS_COMPLETED),
    "marker_other_part": (0xC3, RS_OFF,
                          RS_CREATED + rs_delta("\u30101\u2020x\u3011".encode())
                          + rs_url(0, 5, out=1) + rs_delta(b"w", 1) + RS_COMPLETED),
    "error_nested": (0x00, RS_STRUCTURED,
                     RS_CREATED + rs_delta(b"x") + b'data: {"type":"error","error":{"type":"e",'
                     b'"code":"c","message":"m"}}\n\n'),
    "not_json": (0x40, RS_OFF | RS_SMALL_EVENT,
                 b": ping\n\ndata: [DONE]\n\ndata: {nope\n\n" + RS_CREATED
                 + rs_delta(b"y" * 600) + rs_delta(b"z")),
    "body_markers": (0x00, RS_OPENAI,
                     b'{"object":"response","status":"incomplete","incomplete_details":'
                     b'{"reason":"content_filter"},"output":[{"type":"message","content":['
                     b'{"type":"output_text","text":"a\\u30101\\u2020s\\u3011 b","annotations":['
                     b'{"type":"file_citation","file_id":"f","filename":"n","start_index":1,'
                     b'"end_index":6},{"type":"url_citation","url":"u","start_index":7,'
                     b'"end_index":8}]}]}]}'),
}


# fuzz_embedding reads an embeddings answer; the same bytes are the text of a request.
def embedding_answer(vector, head=b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":',
                     tail=b'}],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}'):
    return head + vector + tail


EMBEDDING_SEEDS = {
    "openai_pretty": (b'{\n  "object": "list",\n  "data": [\n    {\n      "object": "embedding",\n'
                      b'      "index": 0,\n      "embedding": [\n        -0.006929283495992422,\n'
                      b'        -0.005336422007530928,\n        0.00024047505110502243\n      ]\n'
                      b'    }\n  ],\n  "model": "text-embedding-ada-002",\n'
                      b'  "usage": {\n    "prompt_tokens": 5,\n    "total_tokens": 5\n  }\n}\n'),
    "dims_64": embedding_answer(b"[" + b",".join(b"%.9g" % ((i % 7 - 3) / 8.0) for i in range(64)) + b"]"),
    "number_forms": embedding_answer(b"[-1.5e-3,2E+2,-0,0.0,1.4e-45,3.4028235e38,-3.4E38,7,0.1e1]"),
    "float_overflow": embedding_answer(b"[0.5,3.5e38]"),
    "double_overflow": embedding_answer(b"[1e999]"),
    "base64": embedding_answer(b'"AACAPwAAAEA="'),
    "not_number": embedding_answer(b'[0.1,"0.2",true,null,[1]]'),
    "empty_vector": embedding_answer(b"[]"),
    "empty_data": b'{"object":"list","data":[]}',
    "error": b'{"error":{"message":"Incorrect API key provided","type":"invalid_request_error",'
             b'"code":"invalid_api_key"}}',
    "html": b"<html><body><h1>502 Bad Gateway</h1></body></html>\r\n",
    "truncated": embedding_answer(b"[0.25,-0.5,0.75")[:60],
    "question_utf8": "How do I charge the X100? \u00e9t\u00e9 \u20ac \U0001f600".encode(),
    "question_invalid_utf8": b'power "up" my\thandset \xff\xc3(\xc0\x80\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82',
}


# fuzz_evstream byte 1 bit 0: mend the CRCs of each message (so mutations reach the headers).
EV_MEND = 1


def ev_header(name, value, kind=7):
    """One event-stream header; kind 7 (string) unless told."""
    n = name.encode()
    if kind in (6, 7):
        return bytes([len(n)]) + n + bytes([kind]) + struct.pack(">H", len(value)) + value
    return bytes([len(n)]) + n + bytes([kind]) + value


def ev_message(headers, payload):
    """An AWS event-stream message: prelude, its CRC, headers, payload, message CRC."""
    total = 16 + len(headers) + len(payload)
    prelude = struct.pack(">II", total, len(headers))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def ev_event(kind, payload):
    h = (ev_header(":event-type", kind.encode()) + ev_header(":content-type", b"application/json")
         + ev_header(":message-type", b"event"))
    return ev_message(h, payload)


def bedrock_stream():
    return b"".join([
        ev_event("messageStart", b'{"p":"abcdefgh","role":"assistant"}'),
        ev_event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":"Paris is the capital"},"p":"ab"}'),
        ev_event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"citation":{"location":{"web":'
                                      b'{"url":"https://x.example/a","domain":"x.example"}}}},"p":"abc"}'),
        ev_event("contentBlockStop", b'{"contentBlockIndex":0,"p":"abcdefghijk"}'),
        ev_event("messageStop", b'{"p":"abcd","stopReason":"end_turn"}'),
        ev_event("metadata", b'{"usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15}}'),
    ])


EVSTREAM_SEEDS = {
    "bedrock_whole": (0xC0, 0, bedrock_stream()),
    "bedrock_r7": (0x40, 0, bedrock_stream()),
    "bedrock_r1_mend": (0x00, EV_MEND, bedrock_stream()),
    "exception": (0x41, 0, ev_event("contentBlockDelta", b'{"delta":{"text":"a"}}') + ev_message(
        ev_header(":exception-type", b"throttlingException") + ev_header(":message-type", b"exception")
        + ev_header(":content-type", b"application/json"), b'{"message":"Too many requests"}')),
    "error": (0x80, 0, ev_message(ev_header(":error-code", b"InternalFailure")
                                  + ev_header(":error-message", b"boom")
                                  + ev_header(":message-type", b"error"), b"")),
    "all_types": (0x80, EV_MEND, ev_message(
        b"".join(ev_header("t%d" % t, v, t) for t, v in [
            (0, b""), (1, b""), (2, b"\x01"), (3, b"\x00\x02"), (4, b"\x00\x00\x00\x04"),
            (5, b"\x00" * 8), (6, b"bytes"), (7, b"str"), (8, b"\x00" * 8), (9, b"\x11" * 16)])
        + ev_header(":event-type", b"contentBlockStop"), b'{"contentBlockIndex":0}')),
    "bad_crc": (0x40, 0, ev_event("messageStart", b"{}")[:-1] + b"\x00"),
    "short_length": (0x80, EV_MEND, struct.pack(">II", 15, 0) + b"\x00" * 8),
    "truncated": (0x41, 0, bedrock_stream()[:150]),
}


# fuzz_bedrock byte 1: request (bits 0-1: sources, none, usage, both), profile (bits 2-4),
# small max_doc_bytes (bit 6), mend the CRCs (bit 7).
BR_SOURCES, BR_NONE, BR_USAGE, BR_BOTH = 0, 1, 2, 3
BR_OPENAI, BR_WEBCHAT, BR_STRUCTURED, BR_OFF = 1 << 2, 2 << 2, 3 << 2, 4 << 2
BR_MEND = 0x80


def br_stream_cited():
    return b"".join([
        ev_event("messageStart", b'{"role":"assistant"}'),
        ev_event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":"Three \\u00e9 [x]"},"p":"a"}'),
        ev_event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"citation":{"title":"source-3",'
                                      b'"sourceContent":[{"text":"th"}],"location":{"documentChar":'
                                      b'{"documentIndex":0,"start":0,"end":5}}}}}'),
        ev_event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"citation":{"sourceContent":'
                                      b'[{"text":"ree"}]}}}'),
        ev_event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"citation":{"location":'
                                      b'{"documentPage":{"documentIndex":7,"start":1,"end":2}}}}}'),
        ev_event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"citation":{"location":'
                                      b'{"searchResultLocation":{"searchResultIndex":2}},"source":'
                                      b'"https://s.example/r"}}}'),
        ev_event("contentBlockStop", b'{"contentBlockIndex":0}'),
        ev_event("messageStop", b'{"stopReason":"max_tokens"}'),
        ev_event("metadata", b'{"usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7}}'),
    ])


BR_BODY = (b'{"output":{"message":{"role":"assistant","content":[{"citationsContent":{"content":'
           b'[{"text":"Paris."}],"citations":[{"location":{"web":{"url":"https://w.example/p",'
           b'"domain":"w.example"}}}]}},{"text":" More."}]}},"stopReason":"end_turn","usage":'
           b'{"inputTokens":1,"outputTokens":2,"totalTokens":3}}')

BEDROCK_SEEDS = {
    "grounded_openwebui": (0xC0, BR_SOURCES, bedrock_stream()),
    "grounded_webchat_mend": (0x41, BR_BOTH | BR_WEBCHAT | BR_MEND, bedrock_stream()),
    "cited_openai": (0x80, BR_SOURCES | BR_OPENAI, br_stream_cited()),
    "cited_structured_mend": (0x03, BR_USAGE | BR_STRUCTURED | BR_MEND, br_stream_cited()),
    "cited_off_r7": (0x42, BR_NONE | BR_OFF, br_stream_cited()),
    "exception": (0x80, BR_SOURCES, ev_event("contentBlockDelta", b'{"delta":{"text":"a"}}') + ev_message(
        ev_header(":exception-type", b"throttlingException") + ev_header(":message-type", b"exception"),
        b'{"message":"slow down"}')),
    "bad_crc": (0x40, BR_NONE, br_stream_cited()[:-1] + b"\x00"),
    "body": (0x80, BR_SOURCES, BR_BODY),
    "body_webchat": (0x80, BR_NONE | BR_WEBCHAT, BR_BODY),
}


# fuzz_alias byte 0: bits 0-1 == 0: the rest is the whole request body; otherwise the rest
# is cut at 0xFF into tool message contents, with as text parts (bit 2, cut again at 0xFE),
# data_sources null (3), assistant messages between (4), the piece raw as the content (5),
# image parts between text parts (6): see fuzz_alias.c.
AL_RAW, AL_TOOLS, AL_PARTS, AL_DS, AL_ASSIST, AL_VALUE, AL_IMAGES = 0, 1, 4, 8, 16, 32, 64
AL_LAKE = b"abfss://docs@lake.dfs.core.windows.net/contracts/2024/msa-acme.pdf"
AL_BOX1 = b"D(1,1.0219,2.3301,3.1045,2.3301,3.1045,2.6122,1.0219,2.6122)"
AL_BOX2 = b"D(2, 0.5, 0.75, 8, 0.75, 8, 1.25, 0.5, 1.25);D(3,-0.1,+2,3.5,2,3.5,4,0,4)"
AL_DOC = (b'{"documents":[{"path":"' + AL_LAKE + b'","title":"MSA","pages":[{"page":1,"lines":['
          b'{"content":"Term: 3 years","polygon":"' + AL_BOX1 + b'"},{"content":"Fees","polygon":"'
          + AL_BOX2 + b'","confidence":0.98,"selected":true,"note":null}]}]},{"path":'
          b'"/data/lake/contracts/2023/nda.pdf","pages":[]}],"count":2}')
AL_DOC2 = (b'[{"source":"' + AL_LAKE + b'","boxes":["' + AL_BOX1 + b'"]},{"source":'
           b'"https://example.com/reports/q3.pdf","short":"/a/b","P9":"P12"}]')


def al_body(*messages, tail=b""):
    return (b'{"model":"gpt-4o","messages":[{"role":"user","content":"Where is the term?"},'
            + b",".join(messages) + b"]" + tail + b"}")


def al_tool(content):
    return b'{"role":"tool","tool_call_id":"call_1","content":' + content + b"}"


def js(b):
    return json.dumps(b.decode(), ensure_ascii=False).encode()


ALIAS_SEEDS = {
    "documents": bytes([AL_TOOLS]) + AL_DOC + b"\xff" + AL_DOC2,
    "escapes": bytes([AL_TOOLS]) + b'{"p":"https:\\/\\/example.com\\/caf\\u00e9\\/\\ud83d\\ude00\\/doc.pdf",'
    b'"q":"/data/lake/caf\xc3\xa9/\xf0\x9f\x98\x80/x.pdf","n\\u0061me":"/data/lake/in/a/name.pdf",'
    b'"lone":"\\ud800/data/lake/lone/half","b":"D(1,1,1,1,1,1,1,1,1)\\u003bD(2,2,2,2,2,2,2,2,2)"}',
    "text_parts": bytes([AL_TOOLS | AL_PARTS | AL_IMAGES]) + b'{"path":"/data/lake/a/b/c.pdf",'
    b'\xfe"box":"' + AL_BOX1 + b'"}\xff[\xfe"' + AL_LAKE + b'"\xfe]',
    "clash": bytes([AL_TOOLS]) + b'{"path":"/data/lake/a/b/c.pdf","alias":"P1"}\xff["' + AL_BOX1
    + b'","B2","P02","B0"]',
    "clash_escaped": bytes([AL_TOOLS]) + b'["/data/lake/a/b/c.pdf","\\u0050\\u0031"]',
    "not_json": bytes([AL_TOOLS]) + b"See /data/lake/a/b/c.pdf, page 1, " + AL_BOX1 + b"\xff"
    + b'{"path":"/data/lake/a/b/c.pdf",}\xff"/data/lake/bare/string.pdf"\xff  "' + AL_LAKE + b'"  ',
    "data_sources_assistant": bytes([AL_TOOLS | AL_DS | AL_ASSIST]) + AL_DOC2 + b"\xff" + AL_DOC
    + b"\xff{}\xff" + AL_DOC2,
    "raw_value": bytes([AL_TOOLS | AL_VALUE]) + b'[{"type":"text","text":' + js(b'{"a":"') + b'},'
    b'{"type":"text","text":' + js(b"/data/lake/a/b/c.pdf\"}") + b'},{"type":"text","text":7}]'
    + b'\xff{"unexpected":"object"}\xffnull',
    "body": bytes([AL_RAW]) + al_body(
        b'{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",'
        b'"function":{"name":"extract","arguments":"{}"}}]}',
        al_tool(js(AL_DOC)),
        al_tool(b'[{"type":"text","text":' + js(AL_DOC2[:40]) + b'},{"type":"text","text":'
                + js(AL_DOC2[40:]) + b'}]'),
        b'{"role":"tool","content":' + js(b'["/not/a/tool/message/at/all"]') + b',"role":"user"}',
        b'{"role":"t\\u006fol","content":' + js(b'["/escaped/role/is/not/a/tool"]') + b'}',
        tail=b',"data_sources":[],"stream":true'),
    "body_pretty": bytes([AL_RAW]) + b'{\n  "data_sources": {},\n  "messages": [\n    {"role": "tool",'
    b' "content": "[\\n  \\"' + AL_BOX2 + b'\\",\\n  \\"/srv/x/y/z/document.pdf\\"\\n]"}\n  ]\n}\n',
    # over 1 KiB of tool output ending in a backslash inside an unterminated string
    "long_unterminated_backslash": bytes([AL_TOOLS]) + b'["' + b"a" * 1100 + b"\\",
    "many_tools": bytes([AL_TOOLS | AL_ASSIST]) + b"\xff".join(
        b'["/data/lake/doc/%02d.pdf","' % i + AL_BOX1 + b'","P%d"]' % (i + 3) for i in range(12)),
}

# fuzz_cohere byte 1: as fuzz_anthropic's (fuzz_dialect.h): request (bits 0-1: sources, none,
# include_usage, both), profile (bits 2-4), small max_event (5), max_doc_bytes 16 (6).
CO_EV = b"event: %s\ndata: %s\n\n"
CO_TEXT = b'{"type":"content-delta","index":0,"delta":{"message":{"content":{"text":"%s"}}}}'
CO_CITE = (b'{"type":"citation-start","index":0,"delta":{"message":{"citations":'
           b'{"start":%s,"end":%s,"text":"t","sources":[%s],"type":"TEXT_CONTENT"}}}}')
CO_DOC = b'{"type":"document","id":"%s","document":{"id":"%s","title":"T","snippet":"s"}}'
CO_END = (b'{"type":"message-end","delta":{"finish_reason":"%s","usage":{"tokens":'
          b'{"input_tokens":3,"output_tokens":4}}}}')


def cohere_events(*events):
    return b"".join(CO_EV % (t.encode(), d) for t, d in events)


COHERE_SEEDS = {
    "template_then_broken": (0x40, AN_NO_REQ, cohere_events(
        ("content-delta", CO_TEXT % b"a"), ("content-delta", CO_TEXT % b"b\\"),
        ("content-delta", CO_TEXT % b"c\x00d"), ("content-delta", CO_TEXT % b"e\\u00e"),
        ("message-end", CO_END % b"COMPLETE"))),
    "offsets_in_characters": (0x41, AN_SOURCES, cohere_events(
        ("content-delta", CO_TEXT % "caf\u00e9 \\ud83d\\ude00 \u00b0".encode()),
        ("citation-start", CO_CITE % (b"0", b"4", CO_DOC % (b"3", b"3") + b"," + CO_DOC % (b"x", b"x"))),
        ("citation-start", CO_CITE % (b"0", b"8", CO_DOC % (b"y", b"y"))),
        ("citation-start", CO_CITE % (b"-1", b"1.5", CO_DOC % (b"z", b"z"))),
        ("message-end", CO_END % b"MAX_TOKENS"))),
    "error_after_citation": (0x80, AN_BOTH | AN_WEBCHAT, cohere_events(
        ("content-delta", CO_TEXT % b"x [1]"), ("citation-start", CO_CITE % (b"0", b"1", CO_DOC % (b"1", b"1"))),
        ("message-end", b'{"type":"message-end","delta":{"finish_reason":"ERROR","error":"boom"}}'))),
    "oversized_text": (0x80, AN_SMALL_EVENT | AN_OPENAI, cohere_events(
        ("content-delta", CO_TEXT % (b"x" * 600)), ("message-end", CO_END % b"COMPLETE"))),
    "body": (0x00, AN_USAGE, b'{"id":"m","finish_reason":"COMPLETE","message":{"content":[{"type":"text",'
             b'"text":"a\xc3\xa9b"}],"citations":[{"start":1,"end":2,"sources":[' + CO_DOC % (b"d", b"d") +
             b']},{"start":0,"end":9,"sources":[]}]},"usage":{"billed_units":{"input_tokens":1}}}'),
}


def http1_answer(content_type, body):
    return (b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


def h2_answer(content_type_field, body):
    """fuzz_up_h2's ops: HEADERS on stream 1 (:status 200 and the content type, table
    indices), then the body as one raw DATA frame ending the stream."""
    return bytes([1, 0, 4, 2, 0, content_type_field, 3, 0, 1, 0x80, len(body) >> 8, len(body) & 0xFF]) + body


# fuzz_up_h1 and fuzz_up_h2: byte 1's end bits 7 pick the cohere dialect (fuzz_shell.h); byte 2
# the client: 0x08 streams in profile openwebui, 0x05 a body in profile off.
UP_COHERE = 0x70


def write(dirname, name, data):
    d = HERE / "corpus" / dirname
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def sse_fixtures():
    return sorted(FIXTURES.glob("*.sse"))


def json_fixtures():
    return sorted(FIXTURES.glob("*.json"))


# Fixtures of tests/fixtures/profiles/ that the seeds above do not cover: annotations and
# [citation:N].
PROFILE_FIXTURES = ["openai_search_stream.sse", "openrouter_stream.sse", "deepseek_citation_stream.sse",
                    "openai_search_response.json", "annotations_flat_response.json"]


def json_events(path):
    """The first few JSON data payloads of an SSE fixture."""
    out = []
    for line in path.read_bytes().replace(b"\r\n", b"\n").split(b"\n"):
        if line.startswith(b"data: {") and len(out) < 3:
            out.append(line[6:])
    return out


# fuzz_gemini byte 1: profile (bits 0-2: openwebui, openai, webchat, structured, markdown,
# off), include_usage (3), small max_event (4), request <source> ids 2 and 5 (5).
GM_OPENWEBUI, GM_OPENAI, GM_WEBCHAT, GM_STRUCTURED, GM_MARKDOWN, GM_OFF = 0, 1, 2, 3, 4, 5
GM_USAGE, GM_SMALL_EVENT, GM_SOURCES = 8, 16, 32


def gm_event(parts, cand=b"", top=b""):
    return (b'data: {"candidates": [{"content": {"parts": ' + parts + b',"role": "model"}' + cand
            + b',"index": 0}]' + top + b'}\r\n\r\n')


def gm_text(t, cand=b""):
    return gm_event(b'[{"text": "' + t + b'"}]', cand)


GM_GROUNDING = (b',"finishReason": "STOP","groundingMetadata": {"groundingChunks": [{"web": {"uri": '
                b'"https://vertexaisearch.cloud.google.com/grounding-api-redirect/A","title": "a.example"}},'
                b'{"retrievedContext": {"title": "m.pdf","text": "snip","customMetadata": [{"key": '
                b'"source_url","stringValue": "kb://m"}]}}],"groundingSupports": [{"segment": '
                b'{"endIndex": 3},"groundingChunkIndices": [1, 0]},{"segment": {"endIndex": 2},'
                b'"groundingChunkIndices": [0]}]}')
GEMINI_SEEDS = {
    "escapes_offsets": (0x40, GM_OFF, gm_text(b"\\u00e9") + gm_text(b"\\ud83d\\ude00x", GM_GROUNDING)),
    "thought_between": (0x41, GM_MARKDOWN, gm_text(b"ab") + gm_event(
        b'[{"text": "[1]", "thought": true},{"text": "c"}]', GM_GROUNDING)),
    "pretty_error_eof": (0x80, GM_OPENWEBUI | GM_USAGE, gm_text(b"a", b',"finishReason": "STOP"')
                         + b'{\n  "error": {\n    "code": 503,\n    "status": "UNAVAILABLE"\n  }\n}'),
    "error_data": (0x42, GM_WEBCHAT | GM_SOURCES, gm_text(b"[5] x")
                   + b'data: {"error": {"code": 429,"message": "quota"}}\r\n\r\n' + gm_text(b"never")),
    "noise_lines": (0x43, GM_OFF, b": ping\r\n\r\n" + gm_text(b"a") + b'  "x": 1\r\n\r\n{"y": 2}\r\n\r\n'
                    + b"data: not json\r\n\r\n" + gm_text(b"b", b',"finishReason": "SAFETY"')),
    "blocked": (0x80, GM_STRUCTURED, b'data: {"promptFeedback": {"blockReason": "SAFETY"}}\r\n\r\n'),
    "body_inserted": (0x00, GM_OFF, b'{"candidates": [{"content": {"parts": [{"text": "\\u00e9t\\u00e9"}]}'
                      + GM_GROUNDING + b'}]}'),
    "small_event": (0xC0, GM_OPENAI | GM_SMALL_EVENT, gm_text(b"x" * 600) + gm_text(b"y", GM_GROUNDING)),
}


def gemini_answers():
    return sorted(f for f in (FIXTURES / "dialects" / "answers").glob("gemini_*")
                  if f.suffix in (".sse", ".json") and ".request." not in f.name)


def bedrock_kb_answers():
    return sorted(f for f in (FIXTURES / "dialects" / "answers").glob("bedrock_kb_*")
                  if f.suffix in (".bin", ".json") and ".request." not in f.name and ".desc." not in f.name)


# fuzz_bedrock_kb byte 1: as fuzz_bedrock's (BR_*). Knowledge Bases' events, and a body whose
# spans are past the text, negative, fractional, and inside a multi-byte character's code point.
KB_BODY = (rb'{"output":{"text":"\u00e9t\u00e9 \ud83d\ude00 ok."},"citations":['
           rb'{"generatedResponsePart":{"textResponsePart":{"span":{"start":0,"end":1}}},'
           rb'"retrievedReferences":[{"content":{"text":"a"},"location":{"s3Location":{"uri":"s3://b/a.pdf"}},'
           rb'"metadata":{"x-amz-bedrock-kb-chunk-id":"c1","x-amz-bedrock-kb-document-page-number":3}}]},'
           rb'{"generatedResponsePart":{"textResponsePart":{"span":{"start":0,"end":99}}},'
           rb'"retrievedReferences":[{"location":{"webLocation":{"url":"https://w.example/p"}}}]},'
           rb'{"citation":{"generatedResponsePart":{"textResponsePart":{"span":{"end":-1}}},'
           rb'"retrievedReferences":[{"location":{"customDocumentLocation":{"id":"d"}}}]}},'
           rb'{"generatedResponsePart":{"textResponsePart":{"span":{"end":2.5}}},'
           rb'"retrievedReferences":[{"location":{}}]}],"guardrailAction":"INTERVENED"}')


def kb_stream():
    return b"".join([
        ev_event("output", rb'{"text":"Charge \u00e9 [1] "}'),
        ev_event("citation", b'{"generatedResponsePart":{"textResponsePart":{"text":"C","span":'
                             b'{"start":0,"end":3}}},"retrievedReferences":[{"content":{"text":"s"},'
                             b'"location":{"type":"S3","s3Location":{"uri":"s3://b/k.pdf"}},"metadata":'
                             b'{"x-amz-bedrock-kb-title":"K"}},{"location":{"webLocation":'
                             b'{"url":"https://w.example/a"}}}]}'),
        ev_event("citation", b'{"citation":{"retrievedReferences":[{"location":{"confluenceLocation":'
                             b'{"url":"https://c.example/x"}}}]}}'),
        ev_event("guardrail", b'{"action":"INTERVENED"}'),
    ])


KB_SEEDS = {
    "events_openwebui": (0xC0, BR_SOURCES, kb_stream()),
    "events_webchat_mend": (0x41, BR_BOTH | BR_WEBCHAT | BR_MEND, kb_stream()),
    "events_off_r7": (0x42, BR_NONE | BR_OFF, kb_stream()),
    "body_offsets": (0x80, BR_NONE, KB_BODY),
    "body_offsets_openai": (0x80, BR_NONE | BR_OPENAI, KB_BODY),
}


def responses_answers():
    return sorted(f for f in (FIXTURES / "dialects" / "answers").glob("responses_*")
                  if f.suffix in (".sse", ".json") and ".request." not in f.name)


def dialect_requests():
    return sorted((FIXTURES / "dialects").glob("*.request.json"))


def cohere_requests():
    """The requests of the cohere answers, and the dialects' own."""
    return sorted((FIXTURES / "dialects" / "answers").glob("cohere_*.request.json")) + dialect_requests()


def bedrock_requests():
    """The requests of the bedrock and bedrock-kb answers, and the dialects' own."""
    return sorted((FIXTURES / "dialects" / "answers").glob("bedrock_*.request.json")) + dialect_requests()


def main():
    for f in sse_fixtures():
        data = f.read_bytes()
        write("sse", f.stem + ".r1021", bytes([0xC0, SSE_CAP_1M]) + data)
        write("sse", f.stem + ".r7", bytes([0x40, SSE_CAP_4K]) + data)
        for i, ev in enumerate(json_events(f)):
            write("json", f"{f.stem}.event{i}", ev)
        write("xform", f.stem + ".default", bytes([0x80, XF_DEFAULT]) + data)
        write("xform", f.stem + ".noreq", bytes([0x41, XF_NO_REQ]) + data)
    for f in json_fixtures():
        data = f.read_bytes()
        json.loads(data)
        write("json", f.stem, data)
        write("xform", f.stem + ".body", bytes([0x80, XF_NO_REQ]) + data)
    for name, (seed, flags, data) in SSE_SEEDS.items():
        write("sse", name, bytes([seed, flags]) + data)
    for name, text in JSON_SEEDS.items():
        write("json", name, text.encode())
    for name, (seed, flags, data) in XFORM_SEEDS.items():
        write("xform", name, bytes([seed, flags]) + data)
    for name in PROFILE_FIXTURES:
        data = (FIXTURES / "profiles" / name).read_bytes()
        stem = name.rsplit(".", 1)[0]
        write("xform", stem + ".default", bytes([0x80, XF_NO_REQ]) + data)
        write("xform", stem + ".webchat", bytes([0x47, XF_NO_REQ | XF_WEBCHAT]) + data)
    for f in dialect_requests() + json_fixtures():
        data = f.read_bytes()
        name = f.name.replace(".request.json", "").replace(".json", "")
        write("dialect_req", name + ".anthropic", bytes([DR_ANTHROPIC | DR_MODEL]) + data)
        write("dialect_req", name + ".responses", bytes([DR_RESPONSES]) + data)
        write("dialect_req", name + ".gemini", bytes([DR_GEMINI | DR_MODEL | DR_TOOLS]) + data)
        write("dialect_req", name + ".vertex", bytes([DR_VERTEX]) + data)
    for f in bedrock_requests():
        data = f.read_bytes()
        name = f.name.replace(".request.json", "")
        write("dialect_req", name + ".bedrock", bytes([DR_BEDROCK | DR_MODEL | DR_EXTRA]) + data)
        write("dialect_req", name + ".bedrock_kb", bytes([DR_BEDROCK_KB | DR_EXTRA]) + data)
    for k, f in enumerate(cohere_requests() + json_fixtures()):  # one citation mode each, in turn
        flags = (DR_COHERE | DR_MODEL, DR_COHERE | DR_ACCURATE, DR_COHERE | DR_OFF | DR_SMALL_DOCS)[k % 3]
        name = f.name.replace(".request.json", "").replace(".json", "")
        write("dialect_req", name + ".cohere", bytes([flags]) + f.read_bytes())
    for name, (flags, data) in DIALECT_SEEDS.items():
        write("dialect_req", name, bytes([flags]) + data)
    for f in sorted((FIXTURES / "dialects" / "answers").glob("anthropic_*")):
        data = f.read_bytes()
        flags = AN_USAGE if "usage" in f.name else AN_SOURCES
        write("anthropic", f.name + ".openwebui", bytes([0x80, flags]) + data)
        write("anthropic", f.name + ".webchat", bytes([0x41, flags | AN_WEBCHAT]) + data)
    for name, (seed, flags, data) in ANTHROPIC_SEEDS.items():
        write("anthropic", name, bytes([seed, flags]) + data)
    for k, f in enumerate(responses_answers()):  # one profile each, in turn
        profile = (RS_OPENWEBUI, RS_OPENAI, RS_WEBCHAT, RS_OFF | RS_USAGE)[k % 4]
        write("responses", f.name.replace(".", "_"), bytes([0x80, profile]) + f.read_bytes())
    for name, (seed, flags, data) in RESPONSES_SEEDS.items():
        write("responses", name, bytes([seed, flags]) + data)
    for k, f in enumerate(gemini_answers()):  # one profile each, in turn
        profile = (GM_OPENWEBUI, GM_OPENAI | GM_SOURCES, GM_WEBCHAT, GM_MARKDOWN, GM_OFF | GM_USAGE,
                   GM_STRUCTURED)[k % 6]
        write("gemini", f.name.replace(".", "_"), bytes([0x80, profile]) + f.read_bytes())
    for name, (seed, flags, data) in GEMINI_SEEDS.items():
        write("gemini", name, bytes([seed, flags]) + data)
    for name, data in EMBEDDING_SEEDS.items():
        write("embedding", name, data)
    for name, (seed, flags, data) in EVSTREAM_SEEDS.items():
        write("evstream", name, bytes([seed, flags]) + data)
    for name, (seed, flags, data) in BEDROCK_SEEDS.items():
        write("bedrock", name, bytes([seed, flags]) + data)
    for k, f in enumerate(bedrock_kb_answers()):  # one profile each, in turn
        profile = (BR_NONE, BR_NONE | BR_OPENAI, BR_NONE | BR_WEBCHAT, BR_NONE | BR_OFF,
                   BR_USAGE | BR_STRUCTURED)[k % 5]
        write("bedrock_kb", f.name.replace(".", "_"), bytes([0x80, profile]) + f.read_bytes())
    for name, (seed, flags, data) in KB_SEEDS.items():
        write("bedrock_kb", name, bytes([seed, flags]) + data)
    for k, f in enumerate(sorted((FIXTURES / "dialects" / "answers").glob("cohere_*"))):
        data = f.read_bytes()  # one profile each, in turn
        flags = (AN_SOURCES, AN_USAGE | AN_OPENAI, AN_NO_REQ | AN_WEBCHAT, AN_BOTH | AN_OFF)[k % 4]
        write("cohere", f.name.replace(".", "_"), bytes([0x80, flags]) + data)
    for name, (seed, flags, data) in COHERE_SEEDS.items():
        write("cohere", name, bytes([seed, flags]) + data)
    e2e = FIXTURES / "dialects" / "e2e"
    stream, body = (e2e / "cohere_stream.sse").read_bytes(), (e2e / "cohere_response.json").read_bytes()
    write("up_h1", "cohere_stream_openwebui", bytes([0x40, UP_COHERE, 0x08])
          + http1_answer(b"text/event-stream", stream))
    write("up_h1", "cohere_body_off", bytes([0x00, UP_COHERE, 0x05])
          + http1_answer(b"application/json", body))
    write("up_h2", "cohere_stream_openwebui", bytes([0x00, UP_COHERE, 0x08]) + h2_answer(12, stream))
    alias_seeds()


def alias_seeds():
    for name, data in ALIAS_SEEDS.items():
        write("alias", name, data)


if __name__ == "__main__":
    main()
