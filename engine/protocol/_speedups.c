/* Native fast path of `engine.protocol.frame.FrameDecoder.feed` (see frame.py).
 *
 * split_frames(data, pos, max_frame, max_header, out) decodes the whole frames of `data`
 * from `pos` on while each one is the common case: a well-formed JSON header whose
 * code/opaque/flag/version are ints within Java's int range, whose language is absent or a
 * known name, whose remark is absent, null or a string and whose extFields are absent, null
 * or an object of strings; or a well-formed ROCKETMQ binary header (the layout of
 * command.py's BINARY_FIXED, then the extFields map) whose strings are UTF-8 (what Apache's
 * benchmark Producer and Consumer send: they set rocketmq.serialize.type=ROCKETMQ).  It
 * appends their `RemotingCommand`s to `out` and returns the position of the first byte it
 * did not consume: the end of the data, the start of an incomplete frame, or the start of a
 * frame it leaves to the pure-Python decoder (anything
 * else, including every malformed frame, so that errors and lenient conversions have one
 * implementation).  The result is the pure-Python decoder's, command for command.
 *
 * configure(command_type, loads, languages, json_type, rocketmq_type) must be called once
 * first: the RemotingCommand class (a slots dataclass), orjson.loads, {language name:
 * LanguageCode}, SerializeType.JSON and SerializeType.ROCKETMQ.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

enum { F_CODE, F_OPAQUE, F_FLAG, F_LANGUAGE, F_VERSION, F_REMARK, F_EXT, F_BODY, F_SERIALIZE,
       N_FIELDS };
static const char *const FIELD_NAMES[N_FIELDS] = {
    "code", "opaque", "flag", "language", "version", "remark", "ext_fields", "body",
    "serialize_type"};

static PyTypeObject *command_type;
static Py_ssize_t offsets[N_FIELDS];
static PyObject *loads, *languages, *json_type, *rocketmq_type, *java_language;
static PyObject *k_code, *k_opaque, *k_flag, *k_version, *k_language, *k_remark, *k_ext;

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *cls, *ld, *langs, *jt, *rt;
    if (!PyArg_ParseTuple(args, "O!OO!OO", &PyType_Type, &cls, &ld, &PyDict_Type, &langs, &jt,
                          &rt))
        return NULL;
    for (int i = 0; i < N_FIELDS; i++) {
        PyObject *descr = PyObject_GetAttrString(cls, FIELD_NAMES[i]);
        if (descr == NULL) return NULL;
        if (Py_TYPE(descr) != &PyMemberDescr_Type) {
            Py_DECREF(descr);
            PyErr_Format(PyExc_TypeError, "%s is not a slot", FIELD_NAMES[i]);
            return NULL;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type != T_OBJECT_EX) {
            Py_DECREF(descr);
            PyErr_Format(PyExc_TypeError, "%s is not an object slot", FIELD_NAMES[i]);
            return NULL;
        }
        offsets[i] = m->offset;
        Py_DECREF(descr);
    }
    PyObject *java = PyDict_GetItemString(langs, "JAVA");
    if (java == NULL) {
        PyErr_SetString(PyExc_ValueError, "languages has no JAVA");
        return NULL;
    }
    Py_XSETREF(java_language, Py_NewRef(java));
    Py_XSETREF(command_type, (PyTypeObject *)Py_NewRef(cls));
    Py_XSETREF(loads, Py_NewRef(ld));
    Py_XSETREF(languages, Py_NewRef(langs));
    Py_XSETREF(json_type, Py_NewRef(jt));
    Py_XSETREF(rocketmq_type, Py_NewRef(rt));
    Py_RETURN_NONE;
}

static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* An int field of the header: absent = 0; 1 with *out set, 0 to leave the frame to Python
 * (not an exact int, or outside int32), -1 on a Python error. */
static int int_field(PyObject *doc, PyObject *key, PyObject **out) {
    PyObject *v = PyDict_GetItemWithError(doc, key);
    if (v == NULL) {
        if (PyErr_Occurred()) return -1;
        *out = PyLong_FromLong(0);
        return *out == NULL ? -1 : 1;
    }
    if (!PyLong_CheckExact(v)) return 0;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || x < INT32_MIN || x > INT32_MAX) return 0;
    *out = Py_NewRef(v);
    return 1;
}

/* The command of one JSON frame; NULL with no error set = leave it to Python. */
static PyObject *json_command(const char *buf, Py_ssize_t start, Py_ssize_t end) {
    Py_ssize_t header_len = be32((const unsigned char *)buf + start) & 0x00FFFFFF;
    Py_ssize_t body_at = start + 4 + header_len;
    PyObject *header = PyBytes_FromStringAndSize(buf + start + 4, header_len);
    if (header == NULL) return NULL;
    PyObject *doc = PyObject_CallOneArg(loads, header);
    Py_DECREF(header);
    if (doc == NULL) {
        PyErr_Clear(); /* not JSON: Python raises the FrameError */
        return NULL;
    }
    PyObject *fields[N_FIELDS] = {NULL};
    PyObject *cmd = NULL;
    int ok = 0;
    if (!PyDict_CheckExact(doc)) goto done;
    int r;
    if ((r = int_field(doc, k_code, &fields[F_CODE])) != 1) { ok = r; goto done; }
    if ((r = int_field(doc, k_opaque, &fields[F_OPAQUE])) != 1) { ok = r; goto done; }
    if ((r = int_field(doc, k_flag, &fields[F_FLAG])) != 1) { ok = r; goto done; }
    if ((r = int_field(doc, k_version, &fields[F_VERSION])) != 1) { ok = r; goto done; }
    PyObject *v = PyDict_GetItemWithError(doc, k_language);
    if (v == NULL) {
        if (PyErr_Occurred()) { ok = -1; goto done; }
        fields[F_LANGUAGE] = Py_NewRef(java_language);
    } else {
        if (!PyUnicode_CheckExact(v)) goto done;
        PyObject *lang = PyDict_GetItemWithError(languages, v);
        if (lang == NULL) { ok = PyErr_Occurred() ? -1 : 0; goto done; }
        fields[F_LANGUAGE] = Py_NewRef(lang);
    }
    v = PyDict_GetItemWithError(doc, k_remark);
    if (v == NULL && PyErr_Occurred()) { ok = -1; goto done; }
    if (v != NULL && v != Py_None && !PyUnicode_CheckExact(v)) goto done;
    fields[F_REMARK] = Py_NewRef(v == NULL ? Py_None : v);
    v = PyDict_GetItemWithError(doc, k_ext);
    if (v == NULL && PyErr_Occurred()) { ok = -1; goto done; }
    if (v != NULL && v != Py_None) {
        if (!PyDict_CheckExact(v)) goto done;
        Py_ssize_t i = 0;
        PyObject *key, *value;
        while (PyDict_Next(v, &i, &key, &value))
            if (!PyUnicode_CheckExact(value)) goto done;
    }
    fields[F_EXT] = Py_NewRef(v == NULL ? Py_None : v);
    if (end > body_at) {
        fields[F_BODY] = PyBytes_FromStringAndSize(buf + body_at, end - body_at);
        if (fields[F_BODY] == NULL) { ok = -1; goto done; }
    } else {
        fields[F_BODY] = Py_NewRef(Py_None);
    }
    fields[F_SERIALIZE] = Py_NewRef(json_type);
    cmd = command_type->tp_alloc(command_type, 0);
    if (cmd == NULL) { ok = -1; goto done; }
    for (int i = 0; i < N_FIELDS; i++) {
        *(PyObject **)((char *)cmd + offsets[i]) = fields[i];
        fields[i] = NULL;
    }
    ok = 1;
done:
    for (int i = 0; i < N_FIELDS; i++) Py_XDECREF(fields[i]);
    Py_DECREF(doc);
    if (ok == 1) return cmd;
    if (ok == 0) PyErr_Clear();
    return NULL;
}

static inline int32_t be32s(const unsigned char *p) { return (int32_t)be32(p); }

/* A UTF-8 string of the binary header; NULL with no error set = not UTF-8 (Python's). */
static PyObject *utf8(const unsigned char *p, Py_ssize_t n) {
    PyObject *s = PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return s;
}

/* The command of one ROCKETMQ binary frame, as command.py's decode_binary_header reads it:
 *   int16 code | int8 language | int16 version | int32 opaque | int32 flag
 *   | int32 remarkLen, remark | int32 extLen, entries (int16 keyLen, key, int32 valLen, value)
 * zero-length strings read as null (an entry with either empty is skipped).  NULL with no
 * error set = leave it to Python (every malformed header). */
static PyObject *binary_command(const char *buf, Py_ssize_t start, Py_ssize_t end) {
    const unsigned char *u = (const unsigned char *)buf;
    Py_ssize_t header_len = be32(u + start) & 0x00FFFFFF;
    Py_ssize_t h = start + 4, body_at = h + header_len;
    if (header_len < 21) return NULL;
    const unsigned char *p = u + h;
    int32_t remark_len = be32s(p + 13);
    if (remark_len < 0 || 17 + (Py_ssize_t)remark_len + 4 > header_len) return NULL;
    Py_ssize_t at = h + 17 + remark_len;
    int32_t ext_len = be32s(u + at);
    at += 4;
    if (ext_len < 0 || at + ext_len > body_at) return NULL;
    PyObject *fields[N_FIELDS] = {NULL};
    PyObject *cmd = NULL;
    int ok = 0;
    if (remark_len) {
        if ((fields[F_REMARK] = utf8(p + 17, remark_len)) == NULL) goto done;
    } else {
        fields[F_REMARK] = Py_NewRef(Py_None);
    }
    if (ext_len) {
        PyObject *ext = fields[F_EXT] = PyDict_New();
        if (ext == NULL) goto done;
        Py_ssize_t map_end = at + ext_len;
        while (at < map_end) {
            if (map_end - at < 6) goto done;
            Py_ssize_t key_len = ((Py_ssize_t)u[at] << 8) | u[at + 1];
            if (key_len & 0x8000 || map_end - at - 6 < key_len) goto done;
            Py_ssize_t key_at = at + 2;
            int32_t val_len = be32s(u + key_at + key_len);
            Py_ssize_t val_at = key_at + key_len + 4;
            if (val_len < 0 || map_end - val_at < val_len) goto done;
            at = val_at + val_len;
            if (key_len && val_len) {
                PyObject *key = utf8(u + key_at, key_len);
                if (key == NULL) goto done;
                PyObject *value = utf8(u + val_at, val_len);
                if (value == NULL) { Py_DECREF(key); goto done; }
                int r = PyDict_SetItem(ext, key, value);
                Py_DECREF(key);
                Py_DECREF(value);
                if (r < 0) goto done;
            }
        }
    } else {
        fields[F_EXT] = Py_NewRef(Py_None);
    }
    if (PyErr_Occurred()) goto done;
    if ((fields[F_CODE] = PyLong_FromLong((int16_t)((p[0] << 8) | p[1]))) == NULL) goto done;
    if ((fields[F_LANGUAGE] = PyLong_FromLong(p[2])) == NULL) goto done;
    if ((fields[F_VERSION] = PyLong_FromLong((int16_t)((p[3] << 8) | p[4]))) == NULL) goto done;
    if ((fields[F_OPAQUE] = PyLong_FromLong(be32s(p + 5))) == NULL) goto done;
    if ((fields[F_FLAG] = PyLong_FromLong(be32s(p + 9))) == NULL) goto done;
    if (end > body_at) {
        if ((fields[F_BODY] = PyBytes_FromStringAndSize(buf + body_at, end - body_at)) == NULL)
            goto done;
    } else {
        fields[F_BODY] = Py_NewRef(Py_None);
    }
    fields[F_SERIALIZE] = Py_NewRef(rocketmq_type);
    cmd = command_type->tp_alloc(command_type, 0);
    if (cmd == NULL) goto done;
    for (int i = 0; i < N_FIELDS; i++) {
        *(PyObject **)((char *)cmd + offsets[i]) = fields[i];
        fields[i] = NULL;
    }
    ok = 1;
done:
    for (int i = 0; i < N_FIELDS; i++) Py_XDECREF(fields[i]);
    return ok ? cmd : NULL;
}

static PyObject *split_frames(PyObject *self, PyObject *args) {
    PyObject *data, *out;
    Py_ssize_t pos, max_frame, max_header;
    if (!PyArg_ParseTuple(args, "O!nnnO!", &PyBytes_Type, &data, &pos, &max_frame,
                          &max_header, &PyList_Type, &out))
        return NULL;
    if (command_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    const char *buf = PyBytes_AS_STRING(data);
    Py_ssize_t end = PyBytes_GET_SIZE(data);
    if (pos < 0 || pos > end) {
        PyErr_SetString(PyExc_ValueError, "pos outside the data");
        return NULL;
    }
    while (end - pos >= 8) {
        int32_t length = (int32_t)be32((const unsigned char *)buf + pos);
        Py_ssize_t start = pos + 4;
        if (length < 4 || (Py_ssize_t)length + 4 > max_frame) break;
        uint32_t word = be32((const unsigned char *)buf + start);
        Py_ssize_t header_len = word & 0x00FFFFFF;
        if (header_len > max_header || header_len > length - 4) break;
        if ((word >> 24) > 1) break; /* neither JSON nor ROCKETMQ */
        if (end - start < length) break; /* incomplete */
        PyObject *cmd = (word >> 24) == 0 ? json_command(buf, start, start + length)
                                          : binary_command(buf, start, start + length);
        if (cmd == NULL) {
            if (PyErr_Occurred()) return NULL;
            break;
        }
        int r = PyList_Append(out, cmd);
        Py_DECREF(cmd);
        if (r < 0) return NULL;
        pos = start + length;
    }
    return PyLong_FromSsize_t(pos);
}


/* ---------------------------------------------------------------- send_header_v2 */

static PyTypeObject *send_header_type;
static PyObject *k_hdr[16]; /* "a".."n", "bname" */

static PyObject *configure_send_header(PyObject *self, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "SendHeader must be a tuple type");
        return NULL;
    }
    Py_XSETREF(send_header_type, (PyTypeObject *)Py_NewRef(cls));
    Py_RETURN_NONE;
}

/* A decimal string as Java's Long.parseLong reads it (an optional '-', 1..19 ASCII digits),
 * within [lo, hi]; 0 = not such a string (Python decides). */
static int parse_long(PyObject *s, long long lo, long long hi, long long *out) {
    if (s == NULL || !PyUnicode_CheckExact(s) || !PyUnicode_IS_ASCII(s)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const char *p = (const char *)PyUnicode_DATA(s);
    int neg = n > 0 && p[0] == '-';
    Py_ssize_t i = neg;
    if (n - i < 1 || n - i > 18) return 0; /* 19 digits could overflow: Python decides */
    long long v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        v = v * 10 + (p[i] - '0');
    }
    if (neg) v = -v;
    if (v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* "true" / "false" / absent; 0 = anything else (Python's strip().lower() decides). */
static int parse_bool(PyObject *s, PyObject **out) {
    if (s == NULL) { *out = Py_False; return 1; }
    if (!PyUnicode_CheckExact(s)) return 0;
    if (PyUnicode_CompareWithASCIIString(s, "true") == 0) { *out = Py_True; return 1; }
    if (PyUnicode_CompareWithASCIIString(s, "false") == 0) { *out = Py_False; return 1; }
    return 0;
}

/* An optional int32 (absent or empty: None); 0 = Python decides. */
static int opt_int32(PyObject *s, PyObject **out) {
    if (s == NULL || (PyUnicode_CheckExact(s) && PyUnicode_GET_LENGTH(s) == 0)) {
        *out = Py_NewRef(Py_None);
        return 1;
    }
    long long v;
    if (!parse_long(s, INT32_MIN, INT32_MAX, &v)) return 0;
    *out = PyLong_FromLongLong(v);
    return *out == NULL ? -1 : 1;
}

/* The SendHeader of a SEND_MESSAGE_V2 extFields dict in the common case, else None (the
 * pure-Python decoder then reads it, or raises the HeaderError naming the field). */
static PyObject *send_header_v2(PyObject *self, PyObject *ext) {
    if (send_header_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure_send_header() was not called");
        return NULL;
    }
    if (!PyDict_CheckExact(ext)) Py_RETURN_NONE;
    PyObject *v[16];
    for (int i = 0; i < 15; i++) {
        v[i] = PyDict_GetItemWithError(ext, k_hdr[i]);
        if (v[i] == NULL && PyErr_Occurred()) return NULL;
    }
    /* a b c: strings, required */
    for (int i = 0; i < 3; i++)
        if (v[i] == NULL || !PyUnicode_CheckExact(v[i])) Py_RETURN_NONE;
    long long d, e, f, g, h;
    if (!parse_long(v[3], INT32_MIN, INT32_MAX, &d) || !parse_long(v[4], INT32_MIN, INT32_MAX, &e)
        || !parse_long(v[5], INT32_MIN, INT32_MAX, &f)
        || !parse_long(v[6], LLONG_MIN, LLONG_MAX, &g)
        || !parse_long(v[7], INT32_MIN, INT32_MAX, &h))
        Py_RETURN_NONE;
    PyObject *k, *m;
    if (!parse_bool(v[10], &k) || !parse_bool(v[12], &m)) Py_RETURN_NONE;
    PyObject *items[14] = {NULL};
    int r;
    if ((r = opt_int32(v[9], &items[9])) != 1) goto fail;
    if ((r = opt_int32(v[11], &items[12])) != 1) goto fail;
    PyObject *name = v[13]; /* ext.get("n") or ext.get("bname") */
    if (name != NULL && !PyUnicode_CheckExact(name)) { r = 0; goto fail; }
    if (name == NULL || PyUnicode_GET_LENGTH(name) == 0) name = v[14];
    if (name != NULL && !PyUnicode_CheckExact(name)) { r = 0; goto fail; }
    if (v[8] != NULL && !PyUnicode_CheckExact(v[8])) { r = 0; goto fail; }
    items[0] = Py_NewRef(v[0]);
    items[1] = Py_NewRef(v[1]);
    items[2] = Py_NewRef(v[2]);
    items[3] = PyLong_FromLongLong(d);
    items[4] = PyLong_FromLongLong(e);
    items[5] = PyLong_FromLongLong(f);
    items[6] = PyLong_FromLongLong(g);
    items[7] = PyLong_FromLongLong(h);
    items[8] = Py_NewRef(v[8] == NULL ? Py_None : v[8]);
    items[10] = Py_NewRef(k);
    items[11] = Py_NewRef(m);
    items[13] = Py_NewRef(name == NULL ? Py_None : name);
    for (int i = 3; i < 8; i++)
        if (items[i] == NULL) { r = -1; goto fail; }
    PyObject *out = send_header_type->tp_alloc(send_header_type, 14);
    if (out == NULL) { r = -1; goto fail; }
    for (int i = 0; i < 14; i++) PyTuple_SET_ITEM(out, i, items[i]);
    return out;
fail:
    for (int i = 0; i < 14; i++) Py_XDECREF(items[i]);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}


/* ---------------------------------------------------------------- message properties */

#define NAME_VALUE 0x01
#define SEPARATOR 0x02

/* A properties string's characters, read whatever their width. */
typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n;
} Props;

static int props_of(PyObject *props, Props *p) {
    if (!PyUnicode_Check(props)) {
        PyErr_SetString(PyExc_TypeError, "properties must be a str");
        return -1;
    }
    p->kind = PyUnicode_KIND(props);
    p->data = PyUnicode_DATA(props);
    p->n = PyUnicode_GET_LENGTH(props);
    return 0;
}

/* Where the entry starting at `at` ends: the next SEPARATOR, or the end. */
static Py_ssize_t entry_end(const Props *p, Py_ssize_t at) {
    while (at < p->n && PyUnicode_READ(p->kind, p->data, at) != SEPARATOR) at++;
    return at;
}

/* Whether props[at:] starts with the ASCII `name` followed by NAME_VALUE. */
static int entry_is(const Props *p, Py_ssize_t at, Py_ssize_t end, const char *name,
                    Py_ssize_t len) {
    if (end - at < len + 1) return 0;
    for (Py_ssize_t i = 0; i < len; i++)
        if (PyUnicode_READ(p->kind, p->data, at + i) != (Py_UCS4)(unsigned char)name[i])
            return 0;
    return PyUnicode_READ(p->kind, p->data, at + len) == NAME_VALUE;
}

/* (TAGS, KEYS or "", UNIQ_KEY) of a properties string: the last non-empty value of each. */
static PyObject *dispatch_values(PyObject *self, PyObject *props) {
    Props p;
    if (props_of(props, &p) < 0) return NULL;
    Py_ssize_t spans[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
    static const char *const names[3] = {"TAGS", "KEYS", "UNIQ_KEY"};
    static const Py_ssize_t lens[3] = {4, 4, 8};
    Py_ssize_t at = 0;
    while (at <= p.n) {
        Py_ssize_t stop = entry_end(&p, at);
        for (int i = 0; i < 3; i++) {
            if (entry_is(&p, at, stop, names[i], lens[i])) {
                Py_ssize_t v = at + lens[i] + 1;
                if (stop > v) { spans[i][0] = v; spans[i][1] = stop; }
                break;
            }
        }
        at = stop + 1;
    }
    PyObject *out[3];
    for (int i = 0; i < 3; i++) {
        if (spans[i][0] < 0)
            out[i] = i == 1 ? PyUnicode_FromStringAndSize("", 0) : Py_NewRef(Py_None);
        else
            out[i] = PyUnicode_Substring(props, spans[i][0], spans[i][1]);
        if (out[i] == NULL) {
            for (int j = 0; j < i; j++) Py_DECREF(out[j]);
            return NULL;
        }
    }
    PyObject *t = PyTuple_Pack(3, out[0], out[1], out[2]);
    for (int i = 0; i < 3; i++) Py_DECREF(out[i]);
    return t;
}

/* (props without its WAIT entry, wait) when WAIT is absent or exactly "true"/"false" (in
 * any ASCII case); None leaves other values to Python's strip().lower(). */
static PyObject *strip_wait(PyObject *self, PyObject *props) {
    Props p;
    if (props_of(props, &p) < 0) return NULL;
    Py_ssize_t n = p.n;
    Py_ssize_t at = 0, start = -1, end = 0;
    while (at <= n) { /* the first entry named WAIT, as str.find does */
        end = entry_end(&p, at);
        if (entry_is(&p, at, end, "WAIT", 4)) { start = at; break; }
        at = end + 1;
    }
    if (start < 0) return Py_BuildValue("(OO)", props, Py_True);
    Py_ssize_t v = start + 5, vlen = end - v;
    int wait;
    char word[6] = {0};
    if (vlen != 4 && vlen != 5) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < vlen; i++) {
        Py_UCS4 c = PyUnicode_READ(p.kind, p.data, v + i);
        if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
        if (c > 127) Py_RETURN_NONE;
        word[i] = (char)c;
    }
    if (strcmp(word, "true") == 0) wait = 1;
    else if (strcmp(word, "false") == 0) wait = 0;
    else Py_RETURN_NONE;
    PyObject *rest;
    if (end < n) { /* props[:start] + props[end + 1:] */
        PyObject *a = PyUnicode_Substring(props, 0, start);
        PyObject *b = a == NULL ? NULL : PyUnicode_Substring(props, end + 1, n);
        rest = b == NULL ? NULL : PyUnicode_Concat(a, b);
        Py_XDECREF(a);
        Py_XDECREF(b);
    } else { /* the last entry: props[:max(start - 1, 0)] */
        rest = PyUnicode_Substring(props, 0, start > 0 ? start - 1 : 0);
    }
    if (rest == NULL) return NULL;
    PyObject *out = Py_BuildValue("(NO)", rest, wait ? Py_True : Py_False);
    return out;
}


/* ---------------------------------------------------------------- commit-log records */

static inline unsigned char *put32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
    return p + 4;
}

static inline unsigned char *put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)(v >> 32));
    return put32(p + 4, (uint32_t)v);
}

static int as_i64(PyObject *o, int64_t *out) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "record field outside int64");
        return -1;
    }
    *out = v;
    return 0;
}

static int as_i32(PyObject *o, int64_t *out, int is_unsigned) {
    if (as_i64(o, out) < 0) return -1;
    if (is_unsigned ? *out < 0 || *out > UINT32_MAX : *out < INT32_MIN || *out > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "record field outside int32");
        return -1;
    }
    return 0;
}

/* write_record(buf, pos, total, magic, crc, queue_id, flag, queue_offset, physical_offset,
 *              sysflag, born_ts, born_ip, born_port, store_ts, store_ip, store_port,
 *              reconsume_times, prepared_offset, body, topic_part, properties)
 * Writes one record at buf[pos:pos + total] in the layout of engine.protocol.message
 * (HEADS + body + topic part + int16 properties length + properties) and returns the
 * offset message id's 16 hex digits of `physical_offset` (upper case). */
static PyObject *write_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 21) {
        PyErr_SetString(PyExc_TypeError, "write_record takes 21 arguments");
        return NULL;
    }
    /* integer arguments by position; 32-bit ones checked against their width */
    static const char is64[21] = {0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 1};
    int64_t n[18];
    for (int i = 1; i < 18; i++) {
        if (i == 11 || i == 14) continue; /* the IP addresses */
        if ((is64[i] ? as_i64(args[i], &n[i]) : as_i32(args[i], &n[i], i == 3)) < 0)
            return NULL; /* i == 3: MAGICCODE, the one unsigned field */
    }
    PyObject *born_ip = args[11], *store_ip = args[14], *body = args[18],
             *topic = args[19], *props = args[20];
    if (!PyBytes_Check(born_ip) || !PyBytes_Check(store_ip) || !PyBytes_Check(body)
        || !PyBytes_Check(topic) || !PyBytes_Check(props)) {
        PyErr_SetString(PyExc_TypeError, "addresses, body, topic and properties are bytes");
        return NULL;
    }
    Py_ssize_t nb = PyBytes_GET_SIZE(body), nt = PyBytes_GET_SIZE(topic),
               np = PyBytes_GET_SIZE(props), nborn = PyBytes_GET_SIZE(born_ip),
               nstore = PyBytes_GET_SIZE(store_ip);
    if ((nborn != 4 && nborn != 16) || (nstore != 4 && nstore != 16) || np > 32767) {
        PyErr_SetString(PyExc_ValueError, "bad address or properties length");
        return NULL;
    }
    Py_ssize_t head = 4 * 5 + 8 * 2 + 4 + 8 + nborn + 4 + 8 + nstore + 4 + 4 + 8 + 4;
    Py_ssize_t total = head + nb + nt + 2 + np;
    if (n[2] != total) {
        PyErr_Format(PyExc_ValueError, "total %lld is not the record's %zd bytes",
                     (long long)n[2], total);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) return NULL;
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) { PyBuffer_Release(&view); return NULL; }
    if (pos < 0 || pos > view.len - total) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "record does not fit the buffer");
        return NULL;
    }
    unsigned char *p = (unsigned char *)view.buf + pos;
    p = put32(p, (uint32_t)total);
    p = put32(p, (uint32_t)n[3]);          /* MAGICCODE */
    p = put32(p, (uint32_t)n[4]);          /* BODYCRC */
    p = put32(p, (uint32_t)n[5]);          /* QUEUEID */
    p = put32(p, (uint32_t)n[6]);          /* FLAG */
    p = put64(p, (uint64_t)n[7]);          /* QUEUEOFFSET */
    p = put64(p, (uint64_t)n[8]);          /* PHYSICALOFFSET */
    p = put32(p, (uint32_t)n[9]);          /* SYSFLAG */
    p = put64(p, (uint64_t)n[10]);         /* BORNTIMESTAMP */
    memcpy(p, PyBytes_AS_STRING(born_ip), nborn); p += nborn;
    p = put32(p, (uint32_t)n[12]);         /* born port */
    p = put64(p, (uint64_t)n[13]);         /* STORETIMESTAMP */
    memcpy(p, PyBytes_AS_STRING(store_ip), nstore); p += nstore;
    p = put32(p, (uint32_t)n[15]);         /* store port */
    p = put32(p, (uint32_t)n[16]);         /* RECONSUMETIMES */
    p = put64(p, (uint64_t)n[17]);         /* PREPARED TRANSACTION OFFSET */
    p = put32(p, (uint32_t)nb);            /* BODY length */
    memcpy(p, PyBytes_AS_STRING(body), nb); p += nb;
    memcpy(p, PyBytes_AS_STRING(topic), nt); p += nt;
    *p++ = (unsigned char)(np >> 8);
    *p++ = (unsigned char)np;
    memcpy(p, PyBytes_AS_STRING(props), np);
    PyBuffer_Release(&view);
    static const char hex[] = "0123456789ABCDEF";
    char id[16];
    uint64_t phys = (uint64_t)n[8];
    for (int i = 15; i >= 0; i--, phys >>= 4) id[i] = hex[phys & 0xF];
    return PyUnicode_FromStringAndSize(id, 16);
}

/* ----------------------------------------------------------------------- index entries */

/* index_put(buf, entries_at, slot_num, count, begin, entries) -> new slots | None
 * The loop of engine.store.index_file.IndexFile.put_keys (`_put_entries`, its reference):
 * appends the (keyHash, physical offset, store time) `entries` to an index file mapped in
 * `buf` from entry number `count` on, each chained to its slot's newest entry and made its
 * slot's head; returns how many slots were empty before.  None (nothing written) leaves
 * anything unusual to Python: an entry that is not a tuple of three ints in range, or one
 * past the buffer. */
static PyObject *index_put(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "index_put(buf, entries_at, slot_num, count, begin, entries: list)");
        return NULL;
    }
    int64_t entries_at, slot_num, count, begin;
    if (as_i64(args[1], &entries_at) < 0 || as_i64(args[2], &slot_num) < 0 ||
        as_i64(args[3], &count) < 0 || as_i64(args[4], &begin) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *entries = args[5];
    Py_ssize_t n = PyList_GET_SIZE(entries);
    if (slot_num <= 0 || slot_num > INT32_MAX || count < 1 || entries_at < 40 ||
        count + n > INT32_MAX)
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) return NULL;
    PyObject *result = NULL;
    int64_t *vals = n ? PyMem_Malloc((size_t)n * 3 * sizeof(int64_t)) : NULL;
    if (n && vals == NULL) { PyErr_NoMemory(); goto done; }
    if (entries_at + (count + n) * 20 > view.len || 40 + slot_num * 4 > entries_at) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* everything checked before anything is written */
        PyObject *e = PyList_GET_ITEM(entries, i);
        if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 3) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        for (int j = 0; j < 3; j++) {
            PyObject *v = PyTuple_GET_ITEM(e, j);
            if (!PyLong_CheckExact(v) || as_i64(v, &vals[i * 3 + j]) < 0) {
                PyErr_Clear();
                result = Py_NewRef(Py_None);
                goto done;
            }
        }
        if (vals[i * 3] < 0 || vals[i * 3] > INT32_MAX) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    unsigned char *buf = view.buf;
    unsigned char *at = buf + entries_at + count * 20;
    int64_t new_slots = 0, diff_ts = -1, diff = -1;
    for (Py_ssize_t i = 0; i < n; i++, count++, at += 20) {
        int64_t khash = vals[i * 3], phy = vals[i * 3 + 1], ts = vals[i * 3 + 2];
        unsigned char *slot = buf + 40 + (khash % slot_num) * 4;
        int64_t prev = (int32_t)be32(slot);
        if (prev <= 0 || prev > count) {
            prev = 0;
            new_slots++;
        }
        if (ts != diff_ts) { /* the keys of a batch share one store time */
            diff_ts = ts;
            if (begin > 0) {
                int64_t d = ts - begin;
                diff = d < 0 ? 0 : d / 1000;
                if (diff > INT32_MAX) diff = INT32_MAX;
            } else {
                diff = 0;
            }
        }
        put32(put32(put64(put32(at, (uint32_t)khash), (uint64_t)phy), (uint32_t)diff),
              (uint32_t)prev);
        put32(slot, (uint32_t)count);
    }
    result = PyLong_FromLongLong(new_slots);
done:
    PyMem_Free(vals);
    PyBuffer_Release(&view);
    return result;
}

/* Java's String.hashCode over the UTF-16 units of text[start:stop], from h; -1 (as a flag
 * in *bad) for a lone surrogate, which the pure-Python hash refuses. */
static uint32_t java_hash_span(int kind, const void *data, Py_ssize_t start, Py_ssize_t stop,
                               uint32_t h, int *bad) {
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *u = (const Py_UCS1 *)data;
        for (Py_ssize_t i = start; i < stop; i++) h = 31u * h + u[i];
        return h;
    }
    for (Py_ssize_t i = start; i < stop; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF) { *bad = 1; return 0; }
        if (c > 0xFFFF) {
            c -= 0x10000;
            h = 31u * h + (0xD800u + (c >> 10));
            h = 31u * h + (0xDC00u + (c & 0x3FF));
        } else {
            h = 31u * h + c;
        }
    }
    return h;
}

/* [abs(String.hashCode(prefix + key)) (0 for Integer.MIN_VALUE) for each non-empty key of
 * keys.split(" ")], the index's key hashes of one record; None leaves a string with a lone
 * surrogate to Python. */
static PyObject *key_hashes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "key_hashes(prefix: str, keys: str)");
        return NULL;
    }
    PyObject *prefix = args[0], *keys = args[1];
    int bad = 0;
    uint32_t h0 = java_hash_span(PyUnicode_KIND(prefix), PyUnicode_DATA(prefix), 0,
                                 PyUnicode_GET_LENGTH(prefix), 0, &bad);
    if (bad) Py_RETURN_NONE;
    int kind = PyUnicode_KIND(keys);
    const void *data = PyUnicode_DATA(keys);
    Py_ssize_t n = PyUnicode_GET_LENGTH(keys);
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    Py_ssize_t at = 0;
    while (at <= n) {
        Py_ssize_t stop = at;
        while (stop < n && PyUnicode_READ(kind, data, stop) != ' ') stop++;
        if (stop > at) {
            uint32_t h = java_hash_span(kind, data, at, stop, h0, &bad);
            if (bad) { Py_DECREF(out); Py_RETURN_NONE; }
            int32_t s = (int32_t)h;
            long v = s == INT32_MIN ? 0 : (s < 0 ? -(long)s : (long)s);
            PyObject *item = PyLong_FromLong(v);
            if (item == NULL || PyList_Append(out, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(item);
        }
        at = stop + 1;
    }
    return out;
}

/* ---------------------------------------------------------------- string_hash */

/* Java's String.hashCode() of a str (over its UTF-16 code units) as a signed int32; None
 * for a str holding a lone surrogate (Python's UTF-16 encoder refuses it: Python answers). */
static PyObject *string_hash(PyObject *self, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "string_hash takes a str");
        return NULL;
    }
    int bad = 0;
    uint32_t h = java_hash_span(PyUnicode_KIND(text), PyUnicode_DATA(text), 0,
                                PyUnicode_GET_LENGTH(text), 0, &bad);
    if (bad) Py_RETURN_NONE;
    return PyLong_FromLong((int32_t)h);
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "Set the command class and lookups (once)."},
    {"string_hash", string_hash, METH_O, "Java's String.hashCode() of a str, or None."},
    {"split_frames", split_frames, METH_VARARGS,
     "Decode the common-case frames of data from pos into out; returns where it stopped."},
    {"configure_send_header", configure_send_header, METH_O, "Set the SendHeader class."},
    {"send_header_v2", send_header_v2, METH_O,
     "The SendHeader of common-case SEND_MESSAGE_V2 extFields, else None."},
    {"dispatch_values", dispatch_values, METH_O,
     "(TAGS, KEYS or \"\", UNIQ_KEY) of a properties string."},
    {"strip_wait", strip_wait, METH_O,
     "(properties without WAIT, wait), or None to leave an unusual WAIT value to Python."},
    {"write_record", (PyCFunction)(void (*)(void))write_record, METH_FASTCALL,
     "Write one commit-log record into a writable buffer; returns the offset's 16 hex digits."},
    {"index_put", (PyCFunction)(void (*)(void))index_put, METH_FASTCALL,
     "Append (keyHash, offset, store time) entries to a mapped index file, or None."},
    {"key_hashes", (PyCFunction)(void (*)(void))key_hashes, METH_FASTCALL,
     "The index's hashes of prefix + each key of a KEYS value, or None (lone surrogate)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups",
                                    "Native fast path of the frame decoder.", -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    k_code = PyUnicode_InternFromString("code");
    k_opaque = PyUnicode_InternFromString("opaque");
    k_flag = PyUnicode_InternFromString("flag");
    k_version = PyUnicode_InternFromString("version");
    k_language = PyUnicode_InternFromString("language");
    k_remark = PyUnicode_InternFromString("remark");
    k_ext = PyUnicode_InternFromString("extFields");
    const char *names[15] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l",
                             "m", "n", "bname"};
    for (int i = 0; i < 15; i++)
        if ((k_hdr[i] = PyUnicode_InternFromString(names[i])) == NULL) return NULL;
    if (!k_code || !k_opaque || !k_flag || !k_version || !k_language || !k_remark || !k_ext)
        return NULL;
    return PyModule_Create(&module);
}
