/* Shared by the C extensions that build instances of a plain __slots__ class without its
 * __init__ (consumer/_crecords.c: ConsumerMessage; producer/_cproduce.c: RecordMetadata):
 * they allocate with tp_alloc and store each field at its slot's byte offset, which
 * slot_offsets() reads from the class's member descriptors once, at bind(); and by those
 * that read and write some slots of Python objects in place (consumer/_cstream.c: Marks;
 * producer/_cproduce.c: FastSend), whose offsets member_offsets() reads. */
#ifndef CONSUMERGROUP_CSLOTS_H
#define CONSUMERGROUP_CSLOTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* The byte offsets of `cls`'s slots `names[0..n)` into `offsets`: 0, or -1 with TypeError
 * when `cls` is not a plain class whose __slots__ are exactly those n writable object
 * slots of its own. */
static inline int
slot_offsets(PyObject *cls, const char *const *names, int n, Py_ssize_t *offsets)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "bind() needs a class");
        return -1;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_itemsize != 0 || !(type->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        type->tp_base != &PyBaseObject_Type) {
        PyErr_Format(PyExc_TypeError, "%s is not a plain __slots__ class", type->tp_name);
        return -1;
    }
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (slots == NULL) {
        return -1;
    }
    Py_ssize_t n_slots = PySequence_Size(slots);
    Py_DECREF(slots);
    if (n_slots != n) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "%s has %zd __slots__, %d are filled", type->tp_name,
                         n_slots, n);
        }
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *descr = PyDict_GetItemString(type->tp_dict, names[i]); /* borrowed */
        if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type) ||
            PyDescr_TYPE(descr) != type) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", type->tp_name,
                         names[i]);
            return -1;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY) ||
            member->offset < (Py_ssize_t)sizeof(PyObject) ||
            member->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", type->tp_name, names[i]);
            return -1;
        }
        offsets[i] = member->offset;
    }
    return 0;
}

/* The byte offsets of the writable object slots `names[0..n)` of `type` (its own or a base
 * class's; other slots may exist) into `offsets`: 0, or -1 with TypeError. Readers check
 * an object's exact type before using them. */
static inline int
member_offsets(PyTypeObject *type, const char *const *names, int n, Py_ssize_t *offsets)
{
    for (int i = 0; i < n; i++) {
        PyObject *descr = PyObject_GetAttrString((PyObject *)type, names[i]);
        if (descr == NULL) {
            return -1;
        }
        int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type);
        if (ok) {
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            ok = member->type == T_OBJECT_EX && !(member->flags & READONLY);
            offsets[i] = member->offset;
        }
        Py_DECREF(descr);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%.100s.%s is not a writable __slots__ member",
                         type->tp_name, names[i]);
            return -1;
        }
    }
    return 0;
}

/* The object in the slot at byte `offset` of `obj` (borrowed; NULL when unset). */
#define SLOT_AT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* Store `value` (a new reference, stolen) in the slot at byte `offset` of `obj`. */
static inline void
set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    *(PyObject **)((char *)obj + offset) = value;
}

#endif
