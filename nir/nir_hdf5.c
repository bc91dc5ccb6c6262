/*
 * nir_hdf5.c - a NIR graph to and from HDF5, in the layout of the nir Python package
 * (nir.write / nir.read, which use h5py):
 *
 *     /version                      string: the NIR version that wrote it ("1.0.7")
 *     /node/type                    string, "NIRGraph"
 *     /node/nodes/<name>/type       string, "Conv2d", "LIF", ...
 *     /node/nodes/<name>/<param>    arrays: float32 parameters, int64 shapes / strides / sizes,
 *                                   or a string (Conv2d's padding "same")
 *     /node/edges                   (E, 2) strings: source name, destination name
 *     /node/metadata/<key>          dt (the time step, float64), time_steps, source, readout
 *
 * Strings are variable-length UTF-8, as h5py writes str; on reading, fixed-length strings are
 * accepted too. Every HDF5 call is checked and an error names the file and the object; HDF5's
 * own error printing is switched off. The file is written to "<path>.tmp" and renamed.
 */
#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "nir_graph.h"
#include "tensor/error.h"

#define NIR_VERSION "1.0.7" /* the version of the nir package whose layout this is */

/* ---- writing ------------------------------------------------------------------------------- */

static hid_t string_type(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 && (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0)) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static bool write_string(hid_t where, const char *name, const char *value)
{
    hid_t t = string_type(), space = H5Screate(H5S_SCALAR);
    hid_t d = t >= 0 && space >= 0
                  ? H5Dcreate2(where, name, t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                  : -1;
    bool ok = d >= 0 && H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) >= 0;
    if (d >= 0) H5Dclose(d);
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    return ok;
}

static bool write_array(hid_t where, const nir_array *a)
{
    if (a->is_text) return write_string(where, a->name, a->text);
    hsize_t dims[4];
    for (int d = 0; d < a->ndim; d++) dims[d] = (hsize_t)a->dim[d];
    hid_t space = a->ndim ? H5Screate_simple(a->ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t file_type = a->is_int ? H5T_STD_I64LE : H5T_IEEE_F32LE;
    hid_t mem_type = a->is_int ? H5T_NATIVE_INT64 : H5T_NATIVE_FLOAT;
    hid_t d = space >= 0 ? H5Dcreate2(where, a->name, file_type, space, H5P_DEFAULT, H5P_DEFAULT,
                                      H5P_DEFAULT)
                         : -1;
    const void *data = a->is_int ? (const void *)a->i : (const void *)a->f;
    bool ok = d >= 0 && H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
    if (d >= 0) H5Dclose(d);
    if (space >= 0) H5Sclose(space);
    return ok;
}

static bool write_double(hid_t where, const char *name, double value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t d = space >= 0 ? H5Dcreate2(where, name, H5T_IEEE_F64LE, space, H5P_DEFAULT,
                                      H5P_DEFAULT, H5P_DEFAULT)
                         : -1;
    bool ok = d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) >= 0;
    if (d >= 0) H5Dclose(d);
    if (space >= 0) H5Sclose(space);
    return ok;
}

static bool write_edges(hid_t where, const nir_graph *g)
{
    const char **names = snn_alloc((size_t)(2 * g->n_edges + 2) * sizeof *names, SNN_CPU);
    if (!names) return false;
    for (int e = 0; e < g->n_edges; e++) {
        names[2 * e] = g->edges[e].src;
        names[2 * e + 1] = g->edges[e].dst;
    }
    hsize_t dims[2] = {(hsize_t)g->n_edges, 2};
    hid_t t = string_type(), space = H5Screate_simple(2, dims, NULL);
    hid_t d = t >= 0 && space >= 0
                  ? H5Dcreate2(where, "edges", t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                  : -1;
    bool ok = d >= 0 && (g->n_edges == 0 ||
                         H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, names) >= 0);
    if (d >= 0) H5Dclose(d);
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    snn_free(names, (size_t)(2 * g->n_edges + 2) * sizeof *names, SNN_CPU);
    return ok;
}

static bool write_graph(hid_t file, const nir_graph *g, const char **what)
{
    *what = "/version";
    if (!write_string(file, "version", NIR_VERSION)) return false;
    *what = "/node";
    hid_t node = H5Gcreate2(file, "node", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (node < 0) return false;
    hid_t nodes = H5Gcreate2(node, "nodes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    bool ok = nodes >= 0 && write_string(node, "type", "NIRGraph");
    for (int i = 0; i < g->n_nodes && ok; i++) {
        const nir_node *n = &g->nodes[i];
        *what = n->name;
        hid_t group = H5Gcreate2(nodes, n->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        ok = group >= 0 && write_string(group, "type", n->type);
        for (int a = 0; a < n->n_arrays && ok; a++) ok = write_array(group, &n->arrays[a]);
        if (group >= 0) H5Gclose(group);
    }
    if (ok) {
        *what = "/node/edges";
        ok = write_edges(node, g);
    }
    if (ok) {
        /* snn.c's notes for readers that want them; NIR readers need not rely on them */
        *what = "/node/metadata";
        hid_t meta = H5Gcreate2(node, "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        ok = meta >= 0 && (g->dt <= 0.0 || write_double(meta, "dt", g->dt));
        if (ok && g->time_steps > 0) {
            nir_array steps = {.name = "time_steps", .is_int = true, .ndim = 0, .numel = 1,
                               .i = &(int64_t){g->time_steps}};
            ok = write_array(meta, &steps);
        }
        ok = ok && write_string(meta, "source", g->source[0] ? g->source : "snn.c") &&
             write_string(meta, "readout", "logits = mean over the time steps of output");
        if (meta >= 0) H5Gclose(meta);
    }
    if (nodes >= 0) H5Gclose(nodes);
    H5Gclose(node);
    return ok;
}

snn_status nir_write_hdf5(const nir_graph *g, const char *path)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    char tmp[1100];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return snn_error(SNN_ERR_ARGUMENT, "snn_nir_write: path '%s' too long", path);
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) return snn_error(SNN_ERR_IO, "snn_nir_write: cannot create '%s'", tmp);
    const char *what = "";
    bool ok = write_graph(file, g, &what);
    if (H5Fclose(file) < 0) ok = false;
    if (ok && rename(tmp, path) == 0) return SNN_OK;
    remove(tmp);
    return snn_error(SNN_ERR_IO, "snn_nir_write: writing '%s' failed at '%s'", path, what);
}

/* ---- reading ------------------------------------------------------------------------------- */

/* A scalar string dataset (variable or fixed length) into buf. */
static bool read_string(hid_t where, const char *name, char *buf, size_t size)
{
    hid_t d = H5Dopen2(where, name, H5P_DEFAULT);
    if (d < 0) return false;
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    bool ok = t >= 0 && H5Tget_class(t) == H5T_STRING && space >= 0 &&
              H5Sget_simple_extent_npoints(space) == 1;
    if (ok && H5Tis_variable_str(t) > 0) {
        char *value = NULL;
        hid_t mem = string_type();
        ok = mem >= 0 && H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) >= 0 && value;
        if (ok) snprintf(buf, size, "%s", value);
        if (value) H5free_memory(value);
        if (mem >= 0) H5Tclose(mem);
    } else if (ok) {
        size_t len = H5Tget_size(t);
        ok = len > 0 && len < size;
        hid_t mem = ok ? H5Tcopy(H5T_C_S1) : -1;
        ok = ok && mem >= 0 && H5Tset_size(mem, len + 1) >= 0 &&
             H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0;
        if (ok) buf[len] = '\0';
        if (mem >= 0) H5Tclose(mem);
    }
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    H5Dclose(d);
    return ok;
}

/* Reads a numeric dataset into a new array of node n (float32 or int64 by its class). */
static snn_status read_array(hid_t group, const char *name, nir_node *n, const char *path)
{
    hid_t d = H5Dopen2(group, name, H5P_DEFAULT);
    if (d < 0) return snn_error(SNN_ERR_FORMAT, "'%s': cannot open '%s/%s'", path, n->name, name);
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    snn_status st = SNN_OK;
    if (cls == H5T_STRING) {
        /* a string parameter (Conv2d's padding "same"), kept as text */
        char text[NIR_TEXT];
        st = read_string(group, name, text, sizeof text) ? nir_add_text(n, name, text)
           : snn_error(SNN_ERR_FORMAT, "'%s': node '%s' parameter '%s' is not a string of at "
                       "most %d characters", path, n->name, name, NIR_TEXT - 1);
    } else if ((cls != H5T_INTEGER && cls != H5T_FLOAT) || ndim < 0 || ndim > 4) {
        st = snn_error(SNN_ERR_FORMAT, "'%s': node '%s' parameter '%s' is not a numeric array of "
                       "at most 4 dims", path, n->name, name);
    } else {
        hsize_t dims[4] = {0};
        int64_t dim[4] = {0};
        H5Sget_simple_extent_dims(space, dims, NULL);
        for (int i = 0; i < ndim; i++) dim[i] = (int64_t)dims[i];
        nir_array *a = nir_add_array(n, name, cls == H5T_INTEGER, ndim, dim);
        if (!a) st = snn_last_status();
        else if (H5Dread(d, a->is_int ? H5T_NATIVE_INT64 : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
                         H5P_DEFAULT, a->is_int ? (void *)a->i : (void *)a->f) < 0)
            st = snn_error(SNN_ERR_FORMAT, "'%s': cannot read '%s/%s'", path, n->name, name);
    }
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    H5Dclose(d);
    return st;
}

static snn_status read_node(hid_t nodes, const char *name, nir_graph *g, const char *path)
{
    hid_t group = H5Gopen2(nodes, name, H5P_DEFAULT);
    if (group < 0) return snn_error(SNN_ERR_FORMAT, "'%s': node '%s' is not a group", path, name);
    char type[64];
    snn_status st = SNN_OK;
    if (!read_string(group, "type", type, sizeof type))
        st = snn_error(SNN_ERR_FORMAT, "'%s': node '%s' has no string 'type' (expected the nir "
                       "package's layout)", path, name);
    nir_node *n = st == SNN_OK ? nir_add_node(g, type, name) : NULL;
    if (st == SNN_OK && !n) st = snn_last_status();
    H5G_info_t info;
    if (st == SNN_OK && H5Gget_info(group, &info) < 0)
        st = snn_error(SNN_ERR_FORMAT, "'%s': cannot list node '%s'", path, name);
    for (hsize_t i = 0; st == SNN_OK && i < info.nlinks; i++) {
        char key[64];
        ssize_t len = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, key,
                                         sizeof key, H5P_DEFAULT);
        if (len <= 0 || (size_t)len >= sizeof key) continue;
        if (strcmp(key, "type") == 0) continue;
        hid_t obj = H5Oopen(group, key, H5P_DEFAULT);
        bool dataset = obj >= 0 && H5Iget_type(obj) == H5I_DATASET;
        if (obj >= 0) H5Oclose(obj);
        if (!dataset) continue; /* input_type / output_type / metadata groups: not needed */
        st = read_array(group, key, n, path);
    }
    H5Gclose(group);
    return st;
}

static snn_status read_edges(hid_t node, nir_graph *g, const char *path)
{
    hid_t d = H5Dopen2(node, "edges", H5P_DEFAULT);
    if (d < 0) return snn_error(SNN_ERR_FORMAT, "'%s': no /node/edges", path);
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (ndim >= 0 && ndim <= 2) H5Sget_simple_extent_dims(space, dims, NULL);
    snn_status st = SNN_OK;
    bool empty = ndim >= 1 && dims[0] == 0;
    if (!empty && (t < 0 || H5Tget_class(t) != H5T_STRING || ndim != 2 || dims[1] != 2 ||
                   dims[0] > 1000000))
        st = snn_error(SNN_ERR_FORMAT, "'%s': /node/edges is not an (E, 2) array of names", path);
    if (st == SNN_OK && !empty) {
        size_t count = (size_t)dims[0] * 2;
        if (H5Tis_variable_str(t) > 0) {
            char **names = snn_alloc(count * sizeof *names, SNN_CPU);
            hid_t mem = string_type();
            if (!names || mem < 0 || H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, names) < 0)
                st = snn_error(SNN_ERR_FORMAT, "'%s': cannot read /node/edges", path);
            for (size_t e = 0; st == SNN_OK && e < count; e += 2)
                st = names[e] && names[e + 1] ? nir_add_edge(g, names[e], names[e + 1])
                                              : snn_error(SNN_ERR_FORMAT, "'%s': empty edge", path);
            if (names && mem >= 0 && st != SNN_ERR_FORMAT)
                H5Dvlen_reclaim(mem, space, H5P_DEFAULT, names);
            if (mem >= 0) H5Tclose(mem);
            if (names) snn_free(names, count * sizeof *names, SNN_CPU);
        } else {
            size_t len = H5Tget_size(t);
            char *flat = len > 0 && len < NIR_NAME ? snn_alloc(count * (len + 1), SNN_CPU) : NULL;
            hid_t mem = flat ? H5Tcopy(H5T_C_S1) : -1;
            if (!flat || mem < 0 || H5Tset_size(mem, len + 1) < 0 ||
                H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, flat) < 0)
                st = snn_error(SNN_ERR_FORMAT, "'%s': cannot read /node/edges", path);
            for (size_t e = 0; st == SNN_OK && e < count; e += 2)
                st = nir_add_edge(g, flat + e * (len + 1), flat + (e + 1) * (len + 1));
            if (mem >= 0) H5Tclose(mem);
            if (flat) snn_free(flat, count * (len + 1), SNN_CPU);
        }
    }
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    H5Dclose(d);
    return st;
}

/* A scalar number of the metadata group (any numeric type); false when absent or not one. */
static bool read_number(hid_t meta, const char *name, double *out)
{
    if (H5Lexists(meta, name, H5P_DEFAULT) <= 0) return false;
    hid_t d = H5Dopen2(meta, name, H5P_DEFAULT);
    hid_t t = d >= 0 ? H5Dget_type(d) : -1, space = d >= 0 ? H5Dget_space(d) : -1;
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    bool ok = (cls == H5T_INTEGER || cls == H5T_FLOAT) && space >= 0 &&
              H5Sget_simple_extent_npoints(space) == 1 &&
              H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    if (d >= 0) H5Dclose(d);
    return ok;
}

/* /node/metadata: dt, time_steps and source where present (every key is optional). */
static snn_status read_metadata(hid_t node, nir_graph *g, const char *path)
{
    if (H5Lexists(node, "metadata", H5P_DEFAULT) <= 0) return SNN_OK;
    hid_t meta = H5Gopen2(node, "metadata", H5P_DEFAULT);
    if (meta < 0) return SNN_OK; /* a metadata dataset, not a group: nothing we read */
    double dt = 0.0, steps = 0.0;
    snn_status st = SNN_OK;
    if (read_number(meta, "dt", &dt) && !(dt > 0.0 && dt < 1e30))
        st = snn_error(SNN_ERR_FORMAT, "'%s': metadata dt = %g (expected a time step > 0)",
                       path, dt);
    else if (dt > 0.0)
        g->dt = dt;
    if (read_number(meta, "time_steps", &steps) && steps >= 1.0 && steps <= 1e9)
        g->time_steps = (int64_t)steps;
    if (H5Lexists(meta, "source", H5P_DEFAULT) > 0 &&
        !read_string(meta, "source", g->source, sizeof g->source))
        g->source[0] = '\0';
    H5Gclose(meta);
    return st;
}

snn_status nir_read_hdf5(nir_graph *g, const char *path)
{
    memset(g, 0, sizeof *g);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    FILE *probe = fopen(path, "rb");
    if (!probe) return snn_error(SNN_ERR_IO, "snn_nir_read: cannot open '%s'", path);
    fclose(probe);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        return snn_error(SNN_ERR_FORMAT, "snn_nir_read: '%s' is not an HDF5 file (expected a NIR "
                         "graph written by nir.write or snn-export-nir)", path);
    snn_status st = SNN_OK;
    hid_t node = H5Gopen2(file, "node", H5P_DEFAULT);
    char type[64] = "";
    if (node < 0 || !read_string(node, "type", type, sizeof type) || strcmp(type, "NIRGraph") != 0)
        st = snn_error(SNN_ERR_FORMAT, "'%s': not a NIR graph (expected /node/type = "
                       "\"NIRGraph\", got \"%s\")", path, type);
    hid_t nodes = st == SNN_OK ? H5Gopen2(node, "nodes", H5P_DEFAULT) : -1;
    if (st == SNN_OK && nodes < 0) st = snn_error(SNN_ERR_FORMAT, "'%s': no /node/nodes", path);
    H5G_info_t info;
    if (st == SNN_OK && H5Gget_info(nodes, &info) < 0)
        st = snn_error(SNN_ERR_FORMAT, "'%s': cannot list /node/nodes", path);
    for (hsize_t i = 0; st == SNN_OK && i < info.nlinks; i++) {
        char name[NIR_NAME];
        ssize_t len = H5Lget_name_by_idx(nodes, ".", H5_INDEX_NAME, H5_ITER_INC, i, name,
                                         sizeof name, H5P_DEFAULT);
        if (len <= 0 || (size_t)len >= sizeof name)
            st = snn_error(SNN_ERR_FORMAT, "'%s': node %llu has no name or one over %d characters",
                           path, (unsigned long long)i, NIR_NAME - 1);
        else
            st = read_node(nodes, name, g, path);
    }
    if (st == SNN_OK) st = read_edges(node, g, path);
    if (st == SNN_OK) {
        if (!read_string(file, "version", g->version, sizeof g->version)) g->version[0] = '\0';
        st = read_metadata(node, g, path);
    }
    if (nodes >= 0) H5Gclose(nodes);
    if (node >= 0) H5Gclose(node);
    H5Fclose(file);
    if (st != SNN_OK) nir_graph_free(g);
    return st;
}
